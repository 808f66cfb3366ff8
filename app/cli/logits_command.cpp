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

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/safetensors_writer.h"
#include "engine/model/dump_recorder.h"
#include "engine/model/model.h"
#include "engine/runtime/backend_factory.h"
#include "engine/runtime/chat_engine.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"
#include "engine/util/token_ids_file.h"
#include "engine/vision/vision_encoder.h"

namespace flashdesk::cli {
namespace {

// One user turn rendered as the chat template renders it (BOS, the effort line in thinking
// mode, the generation prompt).
// One user turn: the images (in order) then the text.
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

NamedTensors read_all(const std::string& path) {
  SafetensorsFile f(path);
  NamedTensors out;
  for (const auto& e : f.tensors()) {
    HostTensor t{e.dtype, e.shape, {}};
    t.bytes.assign(f.data(e), f.data(e) + e.nbytes);
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

int64_t argmax(std::span<const float> logits) {
  return std::max_element(logits.begin(), logits.end()) - logits.begin();  // first max
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

}  // namespace

int run_logits(int argc, char** argv) {
  cxxopts::Options opts("flashdesk-cli logits",
                        "FP32 logits of a prefill and decode steps, with per-block dumps "
                        "(docs/logits-dump.md)");
  opts.add_options()("model", "model directory", cxxopts::value<std::string>())(
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
      cxxopts::value<std::string>())("out", "output safetensors file",
                                     cxxopts::value<std::string>())(
      "thinking", "with --prompt: on | off", cxxopts::value<std::string>()->default_value("on"))(
      "effort", "with --prompt: reasoning effort 1-100, low, high or max",
      cxxopts::value<std::string>()->default_value("high"))(
      "threads", "CPU threads (0 = all cores)", cxxopts::value<int>()->default_value("0"))(
      "backend", "cpu-reference (the plain reference), cpu (optimised, same bits), cuda or cuda:N",
      cxxopts::value<std::string>()->default_value("cpu-reference"))("h,help", "this help");
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
  if (!args.count("model") || !args.count("out"))
    throw InvalidRequest("logits needs --model DIR and --out FILE");
  if (args.count("image") && !args.count("prompt"))
    throw InvalidRequest("--image needs --prompt (the images are placed before its text)");
  const bool block_inputs = args.count("block-inputs") > 0;
  if (!block_inputs && args.count("ids") + args.count("prompt") != 1)
    throw InvalidRequest("logits needs one of --ids FILE, --prompt TEXT or --block-inputs FILE");
  if (args.count("decode-ids") && args["decode"].as<int64_t>() > 0)
    throw InvalidRequest("--decode and --decode-ids exclude each other");
  if (args["decode"].as<int64_t>() < 0) throw InvalidRequest("--decode must be >= 0");

  const std::string model_dir = args["model"].as<std::string>();
  std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(model_dir);
  const std::vector<ImageRef> images =
      prepare_images(*ckpt, args.count("image") ? args["image"].as<std::vector<std::string>>()
                                                : std::vector<std::string>{});
  std::vector<ImageSpan> spans;
  NamedTensors inputs;
  std::vector<int32_t> prompt, forced;
  bool teacher = args.count("decode-ids") > 0;
  if (block_inputs) {
    const std::string path = args["block-inputs"].as<std::string>();
    inputs = read_all(path);
    prompt = ids_from(inputs, "prompt_ids", path, true);
    forced = ids_from(inputs, "decode_input_ids", path, false);
    teacher = true;
  } else if (args.count("prompt")) {
    const RenderedPrompt rendered =
        render_prompt(model_dir, args["prompt"].as<std::string>(), images,
                      args["thinking"].as<std::string>(), args["effort"].as<std::string>());
    prompt.assign(rendered.ids.begin(), rendered.ids.end());
    spans = rendered.images;
    if (teacher) forced = read_token_ids(args["decode-ids"].as<std::string>());
  } else {
    prompt = read_token_ids(args["ids"].as<std::string>());
    if (teacher) forced = read_token_ids(args["decode-ids"].as<std::string>());
  }
  const int64_t T = teacher ? static_cast<int64_t>(forced.size()) : args["decode"].as<int64_t>();
  const int64_t P = static_cast<int64_t>(prompt.size());
  const PrefillMode mode = parse_prefill_mode(args["prefill"].as<std::string>());
  const bool all_positions = args.count("all-positions") > 0;
  const bool dump = args.count("dump") > 0;

  const auto backend = make_backend(args["backend"].as<std::string>(), args["threads"].as<int>());
  Model model(ckpt, *backend);
  const TextConfig& text = model.config().text;
  const int64_t V = text.vocab_size;
  SequenceState state = model.new_sequence();

  std::vector<TensorData> out;
  std::vector<int64_t> prompt64(prompt.begin(), prompt.end());
  out.push_back(data("prompt_ids", DType::I64, {P}, prompt64));

  const bool observe = dump || block_inputs;
  DumpRecorder pre_rec(model, "prefill_", P, 0, 0);
  if (block_inputs) pre_rec.set_block_inputs(&inputs);
  PrefillOptions po{mode, 0, all_positions};
  std::vector<ImageEmbedding> embeddings;
  if (!images.empty()) {
    VisionEncoder encoder(*ckpt, *backend);
    std::vector<int64_t> span_rows;
    for (size_t i = 0; i < images.size(); ++i) {
      embeddings.push_back(
          ImageEmbedding{static_cast<int64_t>(spans[i].begin), encoder.encode(images[i]->pixels)});
      span_rows.insert(span_rows.end(),
                       {static_cast<int64_t>(spans[i].begin), static_cast<int64_t>(spans[i].end)});
    }
    out.push_back(
        data("image_spans", DType::I64, {static_cast<int64_t>(images.size()), 2}, span_rows));
    po.images = embeddings;
  }
  std::vector<float> logits = model.prefill(state, prompt, po, observe ? &pre_rec : nullptr);
  out.push_back(data("prefill_logits", DType::F32, {all_positions ? P : 1, V}, logits));
  if (dump) {
    pre_rec.finish(candidate_entries(model, state));
    add_recorded(pre_rec, out);
    add_caches(model, state, "prefill_", out);
  }

  DumpRecorder dec_rec(model, "decode_", 1, T, P);
  if (block_inputs) dec_rec.set_block_inputs(&inputs);
  std::vector<float> dec_logits;
  std::vector<int64_t> dec_ids, dec_pos, dec_argmax;
  std::span<const float> last(logits.data() + logits.size() - static_cast<size_t>(V),
                              static_cast<size_t>(V));
  int64_t next = argmax(last);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = teacher ? forced[static_cast<size_t>(t)] : static_cast<int32_t>(next);
    dec_rec.begin_step(t);
    std::vector<float> l = model.decode(state, id, observe ? &dec_rec : nullptr);
    next = argmax(l);
    dec_ids.push_back(id);
    dec_pos.push_back(P + t);
    dec_argmax.push_back(next);
    dec_logits.insert(dec_logits.end(), l.begin(), l.end());
  }
  if (T > 0) {
    out.push_back(data("decode_logits", DType::F32, {T, V}, dec_logits));
    out.push_back(data("decode_input_ids", DType::I64, {T}, dec_ids));
    out.push_back(data("decode_positions", DType::I64, {T}, dec_pos));
    out.push_back(data("decode_argmax", DType::I64, {T}, dec_argmax));
    if (dump) {
      dec_rec.finish(candidate_entries(model, state));
      add_recorded(dec_rec, out);
      add_caches(model, state, "decode_", out);
    }
  }
  const std::string name = !model.config().name.empty()
                               ? model.config().name
                               : std::filesystem::path(model_dir).filename().string();
  write_safetensors(args["out"].as<std::string>(), out,
                    {{"engine", std::string("flashdesk ") + FLASHDESK_VERSION},
                     {"prefill_mode", mode == PrefillMode::Exact ? "exact" : "bounded"},
                     {"config_name", name},
                     {"all_positions", all_positions ? "true" : "false"}});
  std::printf("wrote %s: %lld prompt tokens, %lld decode steps\n",
              args["out"].as<std::string>().c_str(), static_cast<long long>(P),
              static_cast<long long>(T));
  return 0;
}

}  // namespace flashdesk::cli
