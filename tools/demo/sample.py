"""The structured sample every task generator returns, and the rule that scores an answer."""

from dataclasses import dataclass, field

from demo import chat_format


@dataclass
class Sample:
    task: str  # "conversation" | "recall" | "arithmetic" | "image" | "prose"
    messages: list  # chat_format messages; the last one is the assistant turn to be answered
    mode: str = "thinking"  # "thinking" | "chat"
    effort: int = None  # 1..100 in thinking mode, None in chat mode
    images: list = field(default_factory=list)  # uint8 arrays [H, W, 3], in placeholder order
    expected: str = ""  # the answer value an eval checks for ("" = not scored)
    match: str = "contains"  # "exact": answer == expected; "contains": see score_answer
    distractors: list = field(default_factory=list)  # wrong values that must not appear
    meta: dict = field(default_factory=dict)

    def prompt_messages(self):
        return self.messages[:-1]

    def final_answer(self):
        return chat_format._text_of(self.messages[-1])

    def final_thinking(self):
        return self.messages[-1].get("thinking", "")


def _words(text):
    out, word = [], []
    for ch in text.lower():
        if ch.isalnum():
            word.append(ch)
        elif word:
            out.append("".join(word))
            word = []
    if word:
        out.append("".join(word))
    return out


def score_answer(expected, answer, match="contains", distractors=()):
    """Whether a generated final answer (the text after </think>, without EOS) is right.

    exact: the stripped answer equals expected. contains: expected occurs as a whole-word sequence
    (case-insensitive, punctuation ignored) and no distractor does.
    """
    answer = answer.strip()
    if match == "exact":
        return answer == expected
    words = _words(answer)

    def has(value):
        v = _words(value)
        return bool(v) and any(words[i : i + len(v)] == v for i in range(len(words) - len(v) + 1))

    return has(expected) and not any(has(d) for d in distractors)
