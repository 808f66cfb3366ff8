"""The V4.1 chat format renderer: exact strings, prefix stability, loss masks, image placeholders."""

import unittest

import demo_support  # noqa: F401  (sets sys.path)
from demo import chat_format as cf

EFFORT_75 = "Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\n"


def _conversation():
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!", "thinking": "greet"},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is this?"}]},
        {"role": "assistant", "content": "A red circle.", "thinking": "look at it"},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "You're welcome.", "thinking": "polite"},
    ]


class ChatFormatTest(unittest.TestCase):
    def test_thinking_mode_string_written_by_hand(self):
        msgs = _conversation()[:5]
        expected = ("<｜begin▁of▁sentence｜><｜System｜>" + EFFORT_75 + "Be brief."
                    "<｜User｜>Hi<｜Assistant｜></think>Hello!<｜end▁of▁sentence｜>"
                    "<｜User｜><｜deepseek_image｜>\n\nWhat is this?<｜Assistant｜><think>look at it</think>"
                    "A red circle.<｜end▁of▁sentence｜>")
        self.assertEqual(cf.render_text(msgs, "thinking", 75), expected)

    def test_chat_mode_and_generation_prompts(self):
        msgs = [{"role": "user", "content": "Hi"}]
        self.assertEqual(cf.render_prompt(msgs, "chat"), "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>")
        self.assertEqual(cf.render_prompt(msgs, "thinking", "max"),
                         "<｜begin▁of▁sentence｜><｜System｜>" + EFFORT_75.replace("75", "100")
                         + "<｜User｜>Hi<｜Assistant｜><think>")
        self.assertEqual(cf.resolve_effort(None), 75)
        self.assertEqual(cf.resolve_effort("low"), 50)
        for bad in (0, 101, "medium", 7.5, True):
            with self.assertRaises(ValueError):
                cf.resolve_effort(bad)

    def test_history_renderings_are_prefixes_as_the_chat_grows(self):
        msgs = _conversation()
        for mode in cf.MODES:
            prev = None
            for n in range(1, len(msgs) + 1):
                text = cf.render_text(msgs[:n], mode, 40)
                if prev is not None and msgs[n - 1]["role"] == "user":
                    # A new user turn: everything before it (older reasoning dropped) is unchanged
                    # up to the previous assistant turn's header.
                    head = prev[: prev.rfind("<｜Assistant｜>")] if "<think>" in prev else prev
                    self.assertTrue(text.startswith(head), (mode, n))
                if mode == "chat" and prev is not None:
                    self.assertTrue(text.startswith(prev), n)
                prev = text
            # The prompt for the next turn extends the whole history in both modes.
            history = msgs[:-1]
            self.assertTrue(cf.render_prompt(history, mode, 40).startswith(
                cf.render_text(history[:-1], mode, 40).rsplit("<｜Assistant｜>", 1)[0]))

    def test_generation_prompt_plus_answer_equals_training_render(self):
        msgs = _conversation()
        for mode in cf.MODES:
            prompt = cf.render_prompt(msgs[:-1], mode, 90)
            last = msgs[-1]
            generated = (last["thinking"] + "</think>" if mode == "thinking" else "") + last["content"] + cf.EOS
            self.assertEqual(prompt + generated, cf.render_text(msgs, mode, 90))

    def test_loss_mask_covers_exactly_the_assistant_outputs(self):
        tok = demo_support.tokenizer()
        msgs = _conversation()
        segs = cf.render_segments(msgs, "thinking", 60)
        ids, mask, images = cf.tokenize_segments(segs, tok, "all")
        self.assertEqual(ids, tok.encode(cf.render_text(msgs, "thinking", 60)))
        targets = tok.decode([i for i, m in zip(ids, mask) if m])
        self.assertEqual(targets, "Hello!<｜end▁of▁sentence｜>A red circle.<｜end▁of▁sentence｜>"
                                  "polite</think>You're welcome.<｜end▁of▁sentence｜>")
        _, mask_last, _ = cf.tokenize_segments(segs, tok, "last")
        self.assertEqual(tok.decode([i for i, m in zip(ids, mask_last) if m]),
                         "polite</think>You're welcome.<｜end▁of▁sentence｜>")
        self.assertEqual(len(images), 1)
        self.assertEqual(ids[images[0]], tok.token_id(cf.IMAGE))

    def test_mid_conversation_system_message_gets_an_assistant_header(self):
        msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                {"role": "system", "content": "s"}]
        self.assertTrue(cf.render_prompt(msgs, "chat").endswith("<｜System｜>s<｜Assistant｜></think>"))


if __name__ == "__main__":
    unittest.main()
