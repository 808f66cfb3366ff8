// `flashdesk-cli logits`: prefill + decode logits and per-block dumps in the safetensors layout
// of docs/logits-dump.md, so any two implementations of V4.1 can be compared with
// tools/compare_logits.py, block by block with --block-inputs.
#include <cxxopts.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/synthetic_options.h"
#include "app/cli/turn_options.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/safetensors_writer.h"
#include "engine/model/cache_forcing.h"
#include "engine/model/dump_recorder.h"
#include "engine/model/model.h"
#include "engine/ops/cuda/cuda_devices.h"
#include "engine/runtime/backend_factory.h"
#include "engine/runtime/chat_engine.h"
#include "engine/runtime/rank_group.h"
#include "engine/runtime/sampler.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"
#include "engine/util/numeric.h"
#include "engine/util/token_ids_file.h"
#include "engine/vision/vision_encoder.h"

namespace flashdesk::cli {
namespace {

// One user turn (the images in order, then the text) rendered as the chat template renders it:
// BOS, the effort line in thinking mode, the generation prompt.
RenderedPrompt render_prompt(const std::filesystem::path& model_dir, const std::string& text,
                             std::span<const ImageRef> images, const std::string& thinking,
                             const std::string& effort) {
  if (thinking != "on" && thinking != "off") throw InvalidRequest("--thinking must be on or off");
  const Tokenizer tokenizer = Tokenizer::from_file(model_dir / "tokenizer.json");
  const ChatTemplate chat(tokenizer);
  ChatOptions options;
  options.mode = thinking == "on" ? ThinkingMode::kThinking : ThinkingMode::kChat;
  options.effort = ReasoningEffort::parse(effort);
  const ChatMessage message = user_message(text, images);
  return chat.render(std::span<const ChatMessage>(&message, 1), options);
}

// Decoded and preprocessed --image files for the checkpoint's vision config.
std::vector<ImageRef> prepare_images(const Checkpoint& ckpt,
                                     const std::vector<std::string>& paths) {
  if (paths.empty()) return {};
  if (!ckpt.config().vision) throw InvalidRequest("--image: the model has no vision tower");
  std::vector<ImageRef> out;
  for (const std::string& p : paths)
    out.push_back(
        std::make_shared<const PreparedImage>(prepare_image_file(p, *ckpt.config().vision)));
  return out;
}

// Every tensor of a dump file; BF16 ones (goldens store bf16-valued streams as BF16) widened to
// F32, exactly, as the block inputs are read as F32.
NamedTensors read_all(const std::string& path) {
  SafetensorsFile f(path);
  NamedTensors out;
  for (const auto& e : f.tensors()) {
    HostTensor t{e.dtype, e.shape, {}};
    if (e.dtype == DType::BF16) {
      t.dtype = DType::F32;
      t.bytes.resize(e.nbytes * 2);
      for (size_t i = 0; i < e.nbytes / 2; ++i) {
        uint16_t h;
        std::memcpy(&h, f.data(e) + 2 * i, 2);
        const float v = bf16_to_f32(h);
        std::memcpy(t.bytes.data() + 4 * i, &v, 4);
      }
    } else {
      t.bytes.assign(f.data(e), f.data(e) + e.nbytes);
    }
    out.emplace(e.name, std::move(t));
  }
  return out;
}

std::vector<int32_t> ids_from(const NamedTensors& file, const std::string& name,
                              const std::string& path, bool required) {
  auto it = file.find(name);
  if (it == file.end()) {
    if (required) throw FormatError(path, "tensor " + name + " is missing");
    return {};
  }
  if (it->second.dtype != DType::I64 || it->second.shape.size() != 1)
    throw FormatError(path, "tensor " + name + " must be I64 [n]");
  std::vector<int32_t> ids;
  for (int64_t v : it->second.as<int64_t>()) ids.push_back(static_cast<int32_t>(v));
  return ids;
}

template <class T>
TensorData data(const std::string& name, DType dtype, std::vector<int64_t> shape,
                const std::vector<T>& values) {
  TensorData t{name, dtype, std::move(shape), {}};
  t.bytes.resize(values.size() * sizeof(T));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// The caches after a phase: compressed entries and index keys of KV sources, every ring.
void add_caches(Model& model, const SequenceState& s, const std::string& prefix,
                std::vector<TensorData>& out) {
  const TextConfig& t = model.config().text;
  for (const LayerRole& r : model.roles()) {
    const std::string suffix = ".layer" + std::to_string(r.layer);
    const GlobalKv& g = s.global[static_cast<size_t>(r.layer)];
    if (g.entries.defined()) {
      out.push_back(data(prefix + "compress_kv" + suffix, DType::F32, {g.n_entries, t.head_dim},
                         model.dequantized_entries(s, r.layer)));
      out.push_back(data(prefix + "index_k" + suffix, DType::F32, {g.n_entries, t.index_head_dim},
                         model.dequantized_index_keys(s, r.layer)));
    }
    out.push_back(data(prefix + "window_kv_cache" + suffix, DType::F32,
                       {t.sliding_window, t.head_dim}, model.dequantized_ring(s, r.layer)));
  }
}

std::map<int64_t, int64_t> candidate_entries(const Model& model, const SequenceState& s) {
  std::map<int64_t, int64_t> m;
  for (const LayerRole& r : model.roles())
    if (r.builds_candidates) m[r.layer] = s.global[static_cast<size_t>(r.kv_source)].n_entries;
  return m;
}

void add_recorded(DumpRecorder& rec, std::vector<TensorData>& out) {
  for (auto& [name, t] : rec.tensors())
    out.push_back(TensorData{name, t.dtype, t.shape, std::move(t.bytes)});
}

cxxopts::Options logits_options() {
  cxxopts::Options opts("flashdesk-cli logits",
                        "FP32 logits of a prefill and decode steps, with per-block dumps "
                        "(docs/logits-dump.md)");
  opts.add_options()("model",
                     "model directory (with --synthetic-weights: a config.json or its directory)",
                     cxxopts::value<std::string>())(
      "ids", "prompt token ids: JSON array or whitespace-separated integers",
      cxxopts::value<std::string>())(
      "prompt", "prompt text: one user turn, rendered with tokenizer.json and the chat template",
      cxxopts::value<std::string>())(
      "image", "an image file for --prompt, placed before the text (repeat for several)",
      cxxopts::value<std::vector<std::string>>())("decode", "greedy decode steps after the prefill",
                                                  cxxopts::value<int64_t>()->default_value("0"))(
      "decode-ids", "teacher-forced decode ids (file, as --ids)", cxxopts::value<std::string>())(
      "all-positions", "logits of every prompt position (exact prefill only)")(
      "prefill", "exact | bounded", cxxopts::value<std::string>()->default_value("exact"))(
      "dump", "add per-block tensors and the caches")(
      "block-inputs", "replace every block's input with the ones recorded in FILE",
      cxxopts::value<std::string>())(
      "block-caches",
      "with --block-inputs: also set the compressed entries and index keys to the file's "
      "(prefill_/decode_ compress_kv and index_k) before every step reads them, and print how "
      "the engine's own compared")("out", "output safetensors file", cxxopts::value<std::string>())(
      "thinking", "with --prompt: on | off", cxxopts::value<std::string>()->default_value("on"))(
      "effort", "with --prompt: reasoning effort 1-100, low, high or max",
      cxxopts::value<std::string>()->default_value("high"))(
      "threads", "CPU threads (0 = all cores)", cxxopts::value<int>()->default_value("0"))(
      "host-experts-from",
      "keep the routed experts of layers >= L in host memory; a GPU backend computes them on the "
      "CPU (hybrid placement)",
      cxxopts::value<int64_t>()->default_value("-1"))(
      "ranks",
      "split the model over N ranks of this process (heads, output groups and experts per rank): "
      "on the CPU backends, or with --backend cuda one rank a GPU (0..N-1) joined by NCCL",
      cxxopts::value<int>()->default_value("1"))(
      "backend", "cpu-reference (the plain reference), cpu (optimised, same bits), cuda or cuda:N",
      cxxopts::value<std::string>()->default_value("cpu-reference"))("h,help", "this help");
  add_synthetic_options(opts);
  return opts;
}

// The combinations of options that make sense; InvalidRequest naming the one that does not.
void check_logits_args(const cxxopts::ParseResult& args) {
  if (!args.count("model") || !args.count("out"))
    throw InvalidRequest("logits needs --model DIR and --out FILE");
  if (args.count("image") && !args.count("prompt"))
    throw InvalidRequest("--image needs --prompt (the images are placed before its text)");
  if (!args.count("block-inputs") && args.count("ids") + args.count("prompt") != 1)
    throw InvalidRequest("logits needs one of --ids FILE, --prompt TEXT or --block-inputs FILE");
  if (args.count("decode-ids") && args["decode"].as<int64_t>() > 0)
    throw InvalidRequest("--decode and --decode-ids exclude each other");
  if (args["decode"].as<int64_t>() < 0) throw InvalidRequest("--decode must be >= 0");
  if (args.count("block-caches") && !args.count("block-inputs"))
    throw InvalidRequest("--block-caches needs --block-inputs (the caches come from that file)");
  const int ranks = args["ranks"].as<int>();
  if (ranks < 1 || ranks > 64) throw InvalidRequest("--ranks must be 1-64");
  if (ranks > 1 || args.count("ranks")) {
    const std::string backend = args["backend"].as<std::string>();
    if (backend != "cpu" && backend != "cpu-reference" && backend != "cuda")
      throw InvalidRequest(
          "--ranks runs on the CPU backends (cpu, cpu-reference) or on GPUs 0..N-1 (cuda), not " +
          backend);
    for (const char* alone : {"dump", "block-inputs", "image", "all-positions", "decode-ids"})
      if (args.count(alone))
        throw InvalidRequest(std::string("--ranks does not combine with --") + alone);
  }
}

// What runs: the prompt (from --ids, --prompt with its images, or a --block-inputs file) and the
// decode ids when they are forced.
struct LogitsInput {
  std::vector<int32_t> prompt;
  std::vector<int32_t> forced;  // teacher-forced decode ids
  bool teacher = false;         // decode the forced ids, not the argmax
  std::vector<ImageRef> images;
  std::vector<ImageSpan> spans;  // of the images in the prompt
  NamedTensors block_inputs;     // recorded block inputs; empty unless --block-inputs
  std::vector<std::pair<int64_t, int64_t>> block_spans;  // the block-inputs file's image spans
};

// The `image_spans` [n, 2] (begin, end) of a block-inputs file, checked against the prompt.
std::vector<std::pair<int64_t, int64_t>> spans_from(const NamedTensors& file,
                                                    const std::string& path, int64_t P) {
  auto it = file.find("image_spans");
  if (it == file.end()) return {};
  const HostTensor& sp = it->second;
  if (sp.dtype != DType::I64 || sp.shape.size() != 2 || sp.shape[1] != 2)
    throw FormatError(path, "image_spans must be I64 [n, 2]");
  std::vector<std::pair<int64_t, int64_t>> out;
  const auto v = sp.as<int64_t>();
  for (size_t i = 0; i + 1 < v.size(); i += 2) {
    if (v[i] < 0 || v[i + 1] <= v[i] || v[i + 1] > P)
      throw FormatError(path, "image_spans: span [" + std::to_string(v[i]) + ", " +
                                  std::to_string(v[i + 1]) + ") is outside the " +
                                  std::to_string(P) + "-token prompt");
    out.emplace_back(v[i], v[i + 1]);
  }
  return out;
}

LogitsInput read_input(const cxxopts::ParseResult& args, const Checkpoint& ckpt) {
  LogitsInput in;
  in.images =
      prepare_images(ckpt, args.count("image") ? args["image"].as<std::vector<std::string>>()
                                               : std::vector<std::string>{});
  in.teacher = args.count("decode-ids") > 0;
  if (args.count("block-inputs")) {
    const std::string path = args["block-inputs"].as<std::string>();
    in.block_inputs = read_all(path);
    in.prompt = ids_from(in.block_inputs, "prompt_ids", path, true);
    in.forced = ids_from(in.block_inputs, "decode_input_ids", path, false);
    in.block_spans = spans_from(in.block_inputs, path, static_cast<int64_t>(in.prompt.size()));
    in.teacher = true;
    return in;
  }
  if (args.count("prompt")) {
    const RenderedPrompt rendered =
        render_prompt(ckpt.dir(), args["prompt"].as<std::string>(), in.images,
                      args["thinking"].as<std::string>(), args["effort"].as<std::string>());
    in.prompt.assign(rendered.ids.begin(), rendered.ids.end());
    in.spans = rendered.images;
  } else {
    in.prompt = read_token_ids(args["ids"].as<std::string>());
  }
  if (in.teacher) in.forced = read_token_ids(args["decode-ids"].as<std::string>());
  return in;
}

// The run's model and what it records.
struct LogitsRun {
  const Checkpoint& ckpt;
  Backend& backend;
  Model& model;
  SequenceState& state;
  bool dump = false;
  bool observe = false;  // record block tensors (dump) or replace block inputs
  std::vector<TensorData>& out;
  CacheForcing* forcing = nullptr;  // --block-caches: the global KV set from the block inputs
};

// The prefill (with image spans encoded by the vision tower); returns its logits.
std::vector<float> run_prefill(LogitsRun& run, const LogitsInput& in, PrefillOptions po) {
  const auto P = static_cast<int64_t>(in.prompt.size());
  std::vector<int64_t> prompt64(in.prompt.begin(), in.prompt.end());
  run.out.push_back(data("prompt_ids", DType::I64, {P}, prompt64));
  DumpRecorder rec(run.model, "prefill_", P, 0, 0);
  if (!in.block_inputs.empty()) rec.set_block_inputs(&in.block_inputs);
  std::vector<ImageEmbedding> embeddings;
  if (!in.images.empty()) {
    VisionEncoder encoder(run.ckpt, run.backend);
    std::vector<int64_t> span_rows;
    for (size_t i = 0; i < in.images.size(); ++i) {
      const auto begin = static_cast<int64_t>(in.spans[i].begin);
      embeddings.push_back(ImageEmbedding{begin, encoder.encode(in.images[i]->pixels)});
      span_rows.insert(span_rows.end(), {begin, static_cast<int64_t>(in.spans[i].end)});
    }
    run.out.push_back(
        data("image_spans", DType::I64, {static_cast<int64_t>(in.images.size()), 2}, span_rows));
    po.images = embeddings;
  } else if (!in.block_spans.empty()) {
    // The file's image spans: their rows take no Engram part and route with bias_vl; what the
    // rows hold comes from the file's embeddings, so placeholder rows mark the spans.
    std::vector<int64_t> span_rows;
    for (const auto& [begin, end] : in.block_spans) {
      embeddings.push_back(ImageEmbedding{
          begin,
          run.backend.zeros(DType::F32, Shape{end - begin, run.model.config().text.hidden_size})});
      span_rows.insert(span_rows.end(), {begin, end});
    }
    run.out.push_back(data("image_spans", DType::I64,
                           {static_cast<int64_t>(in.block_spans.size()), 2}, span_rows));
    po.images = embeddings;
  }
  std::vector<float> logits =
      run.model.prefill(run.state, in.prompt, po, run.observe ? &rec : nullptr);
  const int64_t V = run.model.config().text.vocab_size;
  run.out.push_back(data("prefill_logits", DType::F32, {po.all_positions ? P : 1, V}, logits));
  if (run.dump) {
    rec.finish(candidate_entries(run.model, run.state));
    add_recorded(rec, run.out);
    add_caches(run.model, run.state, "prefill_", run.out);
  }
  // After the dump, so that it holds the engine's own caches.
  if (run.forcing) force_global_kv(run.model, run.state, in.block_inputs, "prefill_", *run.forcing);
  return logits;
}

// `steps` decode steps after the prefill whose last logits are `last`: greedy, or the forced ids.
void run_decode(LogitsRun& run, const LogitsInput& in, int64_t steps, std::span<const float> last) {
  const auto P = static_cast<int64_t>(in.prompt.size());
  DumpRecorder rec(run.model, "decode_", 1, steps, P);
  if (!in.block_inputs.empty()) rec.set_block_inputs(&in.block_inputs);
  std::vector<float> logits;
  std::vector<int64_t> ids, positions, argmaxes;
  int64_t next = argmax(last);
  for (int64_t t = 0; t < steps; ++t) {
    const int32_t id = in.teacher ? in.forced[static_cast<size_t>(t)] : static_cast<int32_t>(next);
    // The entries the previous step added; the last step's stay the engine's own in the dump.
    if (run.forcing && t > 0)
      force_global_kv(run.model, run.state, in.block_inputs, "decode_", *run.forcing);
    rec.begin_step(t);
    const std::vector<float> l = run.model.decode(run.state, id, run.observe ? &rec : nullptr);
    next = argmax(l);
    ids.push_back(id);
    positions.push_back(P + t);
    argmaxes.push_back(next);
    logits.insert(logits.end(), l.begin(), l.end());
  }
  if (steps == 0) return;
  const int64_t V = run.model.config().text.vocab_size;
  run.out.push_back(data("decode_logits", DType::F32, {steps, V}, logits));
  run.out.push_back(data("decode_input_ids", DType::I64, {steps}, ids));
  run.out.push_back(data("decode_positions", DType::I64, {steps}, positions));
  run.out.push_back(data("decode_argmax", DType::I64, {steps}, argmaxes));
  if (run.dump) {
    rec.finish(candidate_entries(run.model, run.state));
    add_recorded(rec, run.out);
    add_caches(run.model, run.state, "decode_", run.out);
  }
}

// --ranks N: the prompt and greedy decode steps on a RankGroup; the logits and ids only.
int run_ranked(const cxxopts::ParseResult& args, std::shared_ptr<const Checkpoint> ckpt,
               const LogitsInput& in, int64_t steps, PrefillMode mode,
               const ModelOptions& model_options, const std::string& model_dir) {
  const int ranks = args["ranks"].as<int>();
  const std::string backend = args["backend"].as<std::string>();
  const int threads = args["threads"].as<int>();
  const int per_rank = threads > 0 ? std::max(1, threads / ranks) : 1;
  // On GPUs: rank r on cuda:r, the ranks joined by NCCL; on the CPU: threads of this process.
  const bool gpus = backend == "cuda";
  RankGroup group(
      ckpt, ranks,
      [&](int r) { return make_backend(gpus ? "cuda:" + std::to_string(r) : backend, per_rank); },
      model_options,
      gpus ? RankGroup::CollectiveMaker(make_nccl_collectives) : RankGroup::CollectiveMaker());
  const auto P = static_cast<int64_t>(in.prompt.size());
  const int64_t V = group.config().text.vocab_size;
  std::vector<TensorData> out;
  out.push_back(data("prompt_ids", DType::I64, {P},
                     std::vector<int64_t>(in.prompt.begin(), in.prompt.end())));
  std::vector<float> last = group.prefill(in.prompt, PrefillOptions{mode, 0, false});
  out.push_back(data("prefill_logits", DType::F32, {1, V}, last));
  std::vector<float> logits;
  std::vector<int64_t> ids, positions, argmaxes;
  for (int64_t t = 0; t < steps; ++t) {
    const auto id = static_cast<int32_t>(argmax(last));
    last = group.decode(id);
    ids.push_back(id);
    positions.push_back(P + t);
    argmaxes.push_back(argmax(last));
    logits.insert(logits.end(), last.begin(), last.end());
  }
  if (steps > 0) {
    out.push_back(data("decode_logits", DType::F32, {steps, V}, logits));
    out.push_back(data("decode_input_ids", DType::I64, {steps}, ids));
    out.push_back(data("decode_positions", DType::I64, {steps}, positions));
    out.push_back(data("decode_argmax", DType::I64, {steps}, argmaxes));
  }
  const std::string name = !group.config().name.empty()
                               ? group.config().name
                               : std::filesystem::path(model_dir).filename().string();
  write_safetensors(args["out"].as<std::string>(), out,
                    {{"engine", std::string("flashdesk ") + FLASHDESK_VERSION},
                     {"prefill_mode", mode == PrefillMode::Exact ? "exact" : "bounded"},
                     {"config_name", name},
                     {"all_positions", "false"},
                     {"ranks", std::to_string(ranks)}});
  std::printf("wrote %s: %lld prompt tokens, %lld decode steps, %d ranks\n",
              args["out"].as<std::string>().c_str(), static_cast<long long>(P),
              static_cast<long long>(steps), ranks);
  return 0;
}

}  // namespace

int run_logits(int argc, char** argv) {
  cxxopts::Options opts = logits_options();
  cxxopts::ParseResult args;
  try {
    args = opts.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw InvalidRequest(e.what());
  }
  if (args.count("help")) {
    std::printf("%s\n", opts.help().c_str());
    return 0;
  }
  check_logits_args(args);
  const std::string model_dir = args["model"].as<std::string>();
  std::shared_ptr<const Checkpoint> ckpt = open_checkpoint(model_dir, synthetic_options(args));
  const LogitsInput in = read_input(args, *ckpt);
  const int64_t steps =
      in.teacher ? static_cast<int64_t>(in.forced.size()) : args["decode"].as<int64_t>();
  const PrefillMode mode = parse_prefill_mode(args["prefill"].as<std::string>());
  const bool all_positions = args.count("all-positions") > 0;

  ModelOptions model_options;  // a published directory: the token map built from tokenizer.json
  model_options.engram_cache_dir = engram_cache_dir({});
  model_options.host_experts_from_layer = args["host-experts-from"].as<int64_t>();
  // --ranks given: the split path, also with one rank (on a GPU: NCCL with world 1).
  if (args["ranks"].as<int>() > 1 || args.count("ranks"))
    return run_ranked(args, ckpt, in, steps, mode, model_options, model_dir);
  const auto backend = make_backend(args["backend"].as<std::string>(), args["threads"].as<int>());
  Model model(ckpt, *backend, model_options);
  SequenceState state = model.new_sequence();
  std::vector<TensorData> out;
  const bool dump = args.count("dump") > 0;
  LogitsRun run{*ckpt, *backend, model, state, dump, dump || !in.block_inputs.empty(), out};
  CacheForcing forcing;
  if (args.count("block-caches")) run.forcing = &forcing;
  const std::vector<float> logits = run_prefill(run, in, PrefillOptions{mode, 0, all_positions});
  const auto V = static_cast<size_t>(model.config().text.vocab_size);
  run_decode(run, in, steps, std::span(logits).last(V));

  const std::string name = !model.config().name.empty()
                               ? model.config().name
                               : std::filesystem::path(model_dir).filename().string();
  write_safetensors(args["out"].as<std::string>(), out,
                    {{"engine", std::string("flashdesk ") + FLASHDESK_VERSION},
                     {"prefill_mode", mode == PrefillMode::Exact ? "exact" : "bounded"},
                     {"config_name", name},
                     {"all_positions", all_positions ? "true" : "false"}});
  std::printf("wrote %s: %lld prompt tokens, %lld decode steps\n",
              args["out"].as<std::string>().c_str(), static_cast<long long>(in.prompt.size()),
              static_cast<long long>(steps));
  if (run.forcing)
    for (const auto& [kind, a] :
         {std::pair{"compressed entries", &forcing.entries}, {"index keys", &forcing.keys}})
      std::printf(
          "block caches, %s: %lld of %lld values differed from the file's (at most %lld "
          "in a row) before they were set to its values\n",
          kind, static_cast<long long>(a->differing), static_cast<long long>(a->values),
          static_cast<long long>(a->worst_row));
  return 0;
}

}  // namespace flashdesk::cli
