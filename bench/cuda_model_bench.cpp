// A whole model (default: the bundled flash-tiny) on the CUDA backend against the `cpu` backend
// of the same machine: prefill and greedy decode tokens/s, and whether the greedy ids agree
// (printed as the number of decode steps until the first difference) and, teacher-forced on the
// cpu backend's ids, at how many steps the argmax agrees and the cpu logits' top-two margin where
// it does not (a near tie, or a real difference). Prints a markdown table.
//
// --ab VAR[=A,B,...] measures an environment switch read per step (FLASHDESK_ENGRAM_AHEAD) on the
// GPU: its values (default 1 and 0) alternate run by run in one process, a row each.
// FLASHDESK_CUDA_GRAPH (auto, 0, 1, capture) and FLASHDESK_CUDA_GRAPH_PART_LAYERS (0, 1, 2, 4, ...)
// are read when a backend is made, so the bench has the backend read them again before each run.
//
//   cuda_model_bench [--model DIR] [--prompt N] [--decode N] [--runs N] [--device N]
//                    [--ab VAR[=A,B,...]]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_timing.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/model/model.h"
#include "engine/ops/cuda/cuda_backend.h"
#include "engine/runtime/backend_factory.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using flashdesk::bench::Clock;
using flashdesk::bench::median;
using flashdesk::bench::seconds_since;

struct Run {
  double prefill_s = 0, decode_s = 0;
  std::vector<int32_t> ids;    // the argmax of each step's logits (greedy decode)
  std::vector<float> margins;  // each step's top-two logit margin
};

// FLASHDESK_CUDA_GRAPH=auto (the default): what its trial chose for one-row decode steps, once
// decided (`line` is left as it is otherwise).
void note_auto_choice(const flashdesk::CudaBackend& cuda, std::string& line) {
  const flashdesk::StepGraphChoice* c = cuda.step_graph_choice();
  if (!c || !c->decided()) return;
  char b[160];
  std::snprintf(b, sizeof b,
                "FLASHDESK_CUDA_GRAPH=auto chose %s for one-row steps: median step %.3f ms as "
                "launches, %.3f ms as graphs",
                c->way(1) == flashdesk::StepGraphChoice::Way::Graphs ? "graphs" : "launches",
                1e3 * c->launches_median(), 1e3 * c->graphs_median());
  line = b;
}

// Greedy decode, or teacher-forced on `forced` (the ids fed are those, the argmax is recorded).
Run run_once(flashdesk::Model& model, const std::vector<int32_t>& prompt, int64_t decode,
             const std::vector<int32_t>* forced = nullptr) {
  flashdesk::SequenceState s = model.new_sequence();
  Run r;
  auto t0 = Clock::now();
  std::vector<float> logits = model.prefill(s, prompt, flashdesk::PrefillOptions{});
  r.prefill_s = seconds_since(t0);
  t0 = Clock::now();
  for (int64_t i = 0; i < decode; ++i) {
    const auto top = std::max_element(logits.begin(), logits.end());
    const auto next = static_cast<int32_t>(top - logits.begin());
    float second = -INFINITY;
    for (size_t v = 0; v < logits.size(); ++v)
      if (static_cast<int32_t>(v) != next) second = std::max(second, logits[v]);
    r.ids.push_back(next);
    r.margins.push_back(*top - second);
    logits = model.decode(s, forced ? (*forced)[static_cast<size_t>(i)] : next);
  }
  r.decode_s = seconds_since(t0);
  return r;
}

// The A/B switch's value for the next runs: in the environment, and for the step graphs'
// switches (read when a backend is made) on the backend itself.
void set_switch(flashdesk::Backend& backend, const std::string& var, const std::string& value) {
  setenv(var.c_str(), value.c_str(), 1);
  if (auto* cuda = dynamic_cast<flashdesk::CudaBackend*>(&backend)) cuda->read_graph_switches();
}

// `into` += `now` - `before`, count by count.
void add_difference(const flashdesk::cuda::StepGraphCounts& now,
                    const flashdesk::cuda::StepGraphCounts& before,
                    flashdesk::cuda::StepGraphCounts& into) {
  into.launches += now.launches - before.launches;
  into.replays += now.replays - before.replays;
  into.instantiations += now.instantiations - before.instantiations;
  into.updates += now.updates - before.updates;
  into.replay_stops += now.replay_stops - before.replay_stops;
}

}  // namespace

static int run_bench(int argc, char** argv) {
  std::string model_dir =
      (std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny").string();
  int64_t prompt_len = 512, decode = 64, runs = 3;
  std::string gpu = "cuda", ab_var;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i], v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--model")
      model_dir = v;
    else if (a == "--prompt")
      prompt_len = std::stoll(v);
    else if (a == "--decode")
      decode = std::stoll(v);
    else if (a == "--runs")
      runs = std::stoll(v);
    else if (a == "--device")
      gpu = "cuda:" + v;
    else if (a == "--ab")
      ab_var = v;
    else {
      std::fprintf(stderr, "cuda_model_bench: unknown option %s\n", a.c_str());
      return 2;
    }
    if (v.empty()) {
      std::fprintf(stderr, "cuda_model_bench: %s needs a value\n", a.c_str());
      return 2;
    }
  }
  std::vector<std::string> ab_values = {"1", "0"};
  if (const size_t eq = ab_var.find('='); eq != std::string::npos) {
    ab_values.clear();
    std::string rest = ab_var.substr(eq + 1);
    ab_var.resize(eq);
    for (size_t at = 0; at <= rest.size();) {
      const size_t comma = std::min(rest.find(',', at), rest.size());
      ab_values.push_back(rest.substr(at, comma - at));
      at = comma + 1;
    }
    if (ab_var.empty() || std::any_of(ab_values.begin(), ab_values.end(),
                                      [](const std::string& s) { return s.empty(); })) {
      std::fprintf(stderr, "cuda_model_bench: --ab wants VAR or VAR=A,B,...\n");
      return 2;
    }
  }
  std::shared_ptr<const flashdesk::Checkpoint> ckpt = flashdesk::Checkpoint::open(model_dir);
  // Prose, not random ids: on a random-id prompt flash-tiny's activations sit where any rounding
  // flip changes the top-k choices downstream, so even the two CPU backends part ways after a few
  // greedy steps (one BF16 ulp in one row of block 1, 66% of top-k rows equal by block 6), and
  // "same greedy ids" would measure that chaos instead of the backend. No sentence repeats: a
  // passage repeated word for word gives compressed entries and index scores that tie exactly,
  // and backends whose scores differ in the last bit break those ties differently (measured
  // 2026-12-02: 21% of prefill top-k rows equal between cuda and cpu on such a prompt, a 2e-2
  // block error by block 1).
  const flashdesk::Tokenizer tok =
      flashdesk::Tokenizer::from_file(std::filesystem::path(model_dir) / "tokenizer.json");
  const std::string passage =
      "Please remember these notes. The red kite lives in the old mill by the river. Tom keeps "
      "his bicycle in the blue shed behind the bakery. The library opens at nine and closes at "
      "five on weekdays. Anna's cat is called Pepper and sleeps on the green sofa. The train to "
      "the coast leaves from platform four every hour. My uncle grows tomatoes, beans and tall "
      "sunflowers in a garden near the school. On Sundays the market sells honey, fresh bread and "
      "warm apple pies. The lighthouse keeper writes a letter to his sister every winter. A small "
      "boat with a yellow sail waits at the end of the wooden pier. Maria plays the violin in the "
      "evening while her brother reads about distant stars. The old clock in the hall stopped at "
      "a quarter past three many years ago. Children run across the meadow chasing a kite shaped "
      "like a dragon. The baker wakes before dawn to light the oven and shape the loaves. Snow "
      "covered the hills, and the village was quiet for three whole days. Peter lost his keys "
      "twice last week, once in the park and once at the station. The museum keeps a map drawn "
      "by a sailor who crossed the ocean alone. Every spring the swallows return to the barn and "
      "build their nests under the roof. Grandmother's recipe for soup needs carrots, onions, "
      "barley and a pinch of thyme. The bridge over the canal was painted white after the "
      "storm. Lucy counts the ships in the harbour from her window each morning. A fox crossed "
      "the road at midnight and disappeared into the dark forest. The teacher asked the class "
      "to write a poem about the sea. Our neighbour repairs old radios in a workshop full of "
      "wires and tiny screws. The river floods the lower fields when the rain lasts a week. "
      "Samuel planted an oak tree on the day his daughter was born. The choir sings in the "
      "church on the hill every second Friday. Rain tapped on the glass while the kettle began "
      "to whistle. The farmer sold two horses and bought a red tractor in the autumn. A "
      "postman on a green bicycle delivers parcels to the farms beyond the hill. The orchestra "
      "tuned their instruments while the audience found their seats. Clara keeps a diary of "
      "the birds she sees from the kitchen window. ";
  std::vector<int32_t> prompt;
  while (static_cast<int64_t>(prompt.size()) < prompt_len)
    for (const auto id : tok.encode(passage)) prompt.push_back(static_cast<int32_t>(id));
  prompt.resize(static_cast<size_t>(prompt_len));
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf(
      "cuda_model_bench: %s, prose prompt of %lld tokens, %lld greedy steps, median of %lld "
      "runs\n\n",
      ckpt->config().name.c_str(), static_cast<long long>(prompt_len),
      static_cast<long long>(decode), static_cast<long long>(runs));
  std::printf(
      "| backend | prefill tok/s | decode tok/s | vs cpu (decode) | same greedy ids | "
      "argmax equal, forced on cpu's ids | cpu margin where not |\n");
  std::printf("| --- | ---: | ---: | ---: | --- | --- | --- |\n");
  std::vector<int32_t> cpu_ids;
  std::vector<float> cpu_margins;
  double cpu_decode = 0;
  for (const std::string& name : {std::string("cpu"), gpu}) {
    const auto backend = flashdesk::make_backend(name, hw);
    flashdesk::Model model(ckpt, *backend);
    run_once(model, prompt, 2);  // warm-up
    // The variants of an A/B (--ab VAR on the GPU: VAR=1 and VAR=0 alternating run by run in
    // this process, so that both meet the same machine state), else one.
    const std::vector<std::string> variants =
        ab_var.empty() || name == "cpu" ? std::vector<std::string>{""} : ab_values;
    std::vector<std::vector<double>> prefill(variants.size()), dec(variants.size());
    std::vector<Run> last(variants.size());
    // The step graphs' counts each variant's runs added (CUDA only).
    const auto* cuda = dynamic_cast<const flashdesk::CudaBackend*>(backend.get());
    std::vector<flashdesk::cuda::StepGraphCounts> graphs(variants.size());
    std::string auto_choice;  // what FLASHDESK_CUDA_GRAPH=auto's trial chose for one-row steps
    for (int64_t r = 0; r < runs; ++r)
      for (size_t v = 0; v < variants.size(); ++v) {
        if (!variants[v].empty()) set_switch(*backend, ab_var, variants[v]);
        const flashdesk::cuda::StepGraphCounts before =
            cuda ? cuda->step_graph_counts() : flashdesk::cuda::StepGraphCounts{};
        last[v] = run_once(model, prompt, decode);
        if (cuda) add_difference(cuda->step_graph_counts(), before, graphs[v]);
        if (cuda) note_auto_choice(*cuda, auto_choice);
        prefill[v].push_back(last[v].prefill_s);
        dec[v].push_back(last[v].decode_s);
      }
    for (size_t v = 0; v < variants.size(); ++v) {
      if (!variants[v].empty()) set_switch(*backend, ab_var, variants[v]);
      const double decode_tok_s = static_cast<double>(decode) / median(dec[v]);
      std::string same = "-", forced_equal = "-", margins = "-";
      if (cpu_ids.empty()) {
        cpu_ids = last[v].ids;
        cpu_margins = last[v].margins;
        cpu_decode = decode_tok_s;
      } else {
        const auto diff = std::mismatch(cpu_ids.begin(), cpu_ids.end(), last[v].ids.begin());
        same = diff.first == cpu_ids.end()
                   ? "all " + std::to_string(decode)
                   : "first " + std::to_string(diff.first - cpu_ids.begin()) + " of " +
                         std::to_string(decode);
        const Run forced = run_once(model, prompt, decode, &cpu_ids);
        int64_t equal = 0;
        float worst_margin = 0;
        for (size_t i = 0; i < cpu_ids.size(); ++i) {
          if (forced.ids[i] == cpu_ids[i])
            ++equal;
          else
            worst_margin = std::max(worst_margin, cpu_margins[i]);
        }
        forced_equal = std::to_string(equal) + " of " + std::to_string(decode);
        if (equal < decode) {
          char b[32];
          std::snprintf(b, sizeof b, "at most %.3g", static_cast<double>(worst_margin));
          margins = b;
        }
      }
      const std::string label = std::string(backend->name()) +
                                (variants[v].empty() ? "" : ", " + ab_var + "=" + variants[v]);
      std::printf("| %s | %.0f | %.1f | %.2fx | %s | %s | %s |\n", label.c_str(),
                  static_cast<double>(prompt_len) / median(prefill[v]), decode_tok_s,
                  decode_tok_s / cpu_decode, same.c_str(), forced_equal.c_str(), margins.c_str());
    }
    for (size_t v = 0; v < variants.size(); ++v) {
      const flashdesk::cuda::StepGraphCounts& c = graphs[v];
      if (c.launches == 0) continue;
      std::printf(
          "\nstep graphs%s%s: %llu launched over the runs, %llu replayed, %llu instantiated, %llu "
          "updated in place, %llu replays stopped\n",
          variants[v].empty() ? "" : ", ",
          variants[v].empty() ? "" : (ab_var + "=" + variants[v]).c_str(),
          static_cast<unsigned long long>(c.launches), static_cast<unsigned long long>(c.replays),
          static_cast<unsigned long long>(c.instantiations),
          static_cast<unsigned long long>(c.updates),
          static_cast<unsigned long long>(c.replay_stops));
    }
    if (!auto_choice.empty()) std::printf("\n%s\n", auto_choice.c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines survive a timeout that stops the run
  try {
    return run_bench(argc, argv);
  } catch (const std::exception& e) {  // no GPU, out of memory, a CUDA error: say which
    std::fprintf(stderr, "cuda_model_bench: %s\n", e.what());
    return 1;
  }
}
