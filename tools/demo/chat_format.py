"""The DeepSeek-V4.1 chat format (docs/model-spec.md §9.3), rendered with a training loss mask.

One conversation = a list of messages:
  {"role": "system"|"user"|"assistant",
   "content": str | [{"type": "text", "text": str} | {"type": "image"}, ...],
   "thinking": str}                          # assistant only; kept only after the last user turn
plus a mode ("thinking" | "chat") and, in thinking mode, a reasoning effort 1..100.

Rendering (same rules as the C++ chat template; keep the strings here in one place):
  BOS; at message 0, "<｜System｜>" when there is a system message or an effort line; in thinking
  mode the effort line EFFORT_LINE.format(N) (ends with a blank line), then the system text.
  User: "<｜User｜>" + parts joined by "\\n\\n" (an image part is "<｜deepseek_image｜>").
  After a user (or mid-conversation system) message that an assistant turn follows, or that ends
  the conversation with a generation prompt: "<｜Assistant｜>" + "<think>" (thinking mode, last user
  turn) or "</think>" (chat mode, or an earlier turn: its reasoning is dropped).
  Assistant: [thinking + "</think>" if thinking mode and after the last user turn] + content + EOS.
Consequence: a conversation rendered turn after turn is a prefix of its longer self, except that
in thinking mode the latest assistant turn's "<think>{thinking}</think>" becomes "</think>" once a
later user turn exists (the cache then matches up to that turn's "<｜Assistant｜>").
"""

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
SYSTEM = "<｜System｜>"
THINK_START = "<think>"
THINK_END = "</think>"
IMAGE = "<｜deepseek_image｜>"
SPECIAL_TOKENS = (BOS, EOS, PAD, USER, ASSISTANT, SYSTEM, THINK_START, THINK_END, IMAGE)

EFFORT_LINE = "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough the reasoning)\n\n"
EFFORT_PRESETS = {"low": 50, "high": 75, "max": 100}
DEFAULT_EFFORT = EFFORT_PRESETS["high"]
MODES = ("thinking", "chat")


def resolve_effort(effort):
    """An integer 1..100 from an int, a preset name or None (the default preset)."""
    if effort is None:
        return DEFAULT_EFFORT
    if isinstance(effort, str):
        if effort not in EFFORT_PRESETS:
            raise ValueError(f"unknown reasoning effort preset {effort!r}; use 1-100 or {sorted(EFFORT_PRESETS)}")
        return EFFORT_PRESETS[effort]
    if isinstance(effort, bool) or not isinstance(effort, int) or not 1 <= effort <= 100:
        raise ValueError(f"reasoning effort must be an integer 1-100, got {effort!r}")
    return effort


def content_parts(message):
    """The message content as a list of parts (a plain string is one text part)."""
    content = message.get("content", "")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _user_text(message):
    pieces = []
    for part in content_parts(message):
        if part["type"] == "image":
            pieces.append(IMAGE)
        elif part["type"] == "text":
            pieces.append(part["text"])
        else:
            raise ValueError(f"unsupported content part type {part['type']!r}")
    return "\n\n".join(pieces)


def _text_of(message):
    parts = content_parts(message)
    if any(p["type"] != "text" for p in parts):
        raise ValueError(f"only user messages may hold images (role {message['role']!r})")
    return "\n\n".join(p["text"] for p in parts)


def _last_user_index(messages):
    for k in range(len(messages) - 1, -1, -1):
        role = messages[k]["role"]
        if role == "user" or (role == "system" and k > 0):
            return k
    return -1


def render_segments(messages, mode="thinking", effort=None, add_generation_prompt=False):
    """The rendering as (text, role_tag) segments; role_tag "target" marks what the model generates.

    Targets: every assistant turn's generated text (thinking + "</think>" where kept, content, EOS).
    Everything else (BOS, headers, "<think>"/"</think>" of the generation prompt, user/system text)
    is tagged "prompt". Concatenating the texts gives render_text's string.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    effort_value = resolve_effort(effort) if mode == "thinking" else None
    last_user = _last_user_index(messages)
    segs = [(BOS, "prompt")]
    for k, msg in enumerate(messages):
        role = msg["role"]
        # The system token, effort line and system text form one segment: every segment boundary
        # then touches a special token, so tokenizing segments one by one equals tokenizing the
        # whole string.
        head = ""
        if k == 0 and (mode == "thinking" or role == "system"):
            head = SYSTEM + (EFFORT_LINE.format(effort_value) if mode == "thinking" else "")
        if role == "system":
            segs.append((head + (SYSTEM if k > 0 else "") + _text_of(msg), "prompt"))
        elif role == "user":
            segs.append((head + USER + _user_text(msg), "prompt"))
        elif role == "assistant":
            segs.append((head, "prompt"))
            if mode == "thinking" and k > last_user:
                segs.append((msg.get("thinking", "") + THINK_END, "target"))
            segs.append((_text_of(msg) + EOS, "target"))
        else:
            raise ValueError(f"unknown role {role!r} at message {k}")
        segs.extend(_assistant_header(messages, k, mode, last_user, add_generation_prompt))
    return [(t, tag) for t, tag in segs if t]


def _assistant_header(messages, k, mode, last_user, add_generation_prompt):
    role = messages[k]["role"]
    if not (role == "user" or (role == "system" and k > 0)):
        return []
    is_last = k == len(messages) - 1
    if is_last and not add_generation_prompt:
        return []
    if not is_last and messages[k + 1]["role"] != "assistant":
        return []
    opener = THINK_START if mode == "thinking" and k >= last_user else THINK_END
    return [(ASSISTANT + opener, "prompt")]


def render_text(messages, mode="thinking", effort=None, add_generation_prompt=False):
    """The rendered conversation as one string (what the C++ chat template must reproduce)."""
    return "".join(t for t, _ in render_segments(messages, mode, effort, add_generation_prompt))


def render_prompt(messages, mode="thinking", effort=None):
    """The prompt for generating the next assistant turn (messages end with a user turn)."""
    return render_text(messages, mode, effort, add_generation_prompt=True)


def tokenize_segments(segments, tokenizer, loss_on="all"):
    """(ids, target_mask, image_positions) for rendered segments.

    target_mask[i] = 1 when token i is a training target (the loss reads the logits at i - 1).
    loss_on="last" keeps only the targets of the final assistant turn.
    image_positions: indices of the "<｜deepseek_image｜>" placeholders, in order.
    """
    if loss_on not in ("all", "last"):
        raise ValueError(f"loss_on must be 'all' or 'last', got {loss_on!r}")
    last_turn_start = _last_prompt_segment(segments) + 1
    ids, mask = [], []
    for n, (text, tag) in enumerate(segments):
        piece = tokenizer.encode(text)
        target = tag == "target" and (loss_on == "all" or n >= last_turn_start)
        ids.extend(piece)
        mask.extend([1 if target else 0] * len(piece))
    image_id = tokenizer.token_id(IMAGE)
    image_positions = [i for i, t in enumerate(ids) if t == image_id]
    return ids, mask, image_positions


def _last_prompt_segment(segments):
    for n in range(len(segments) - 1, -1, -1):
        if segments[n][1] == "prompt":
            return n
    return -1
