"""unittest of the Python bindings against the CLI on the shared llama (run from .ci/run via
ctest's python_unittest, or: PYTHONPATH=build/release/python TQ_CLI=build/release/src/cli/turboquant
python3 -m unittest discover -s python/tests)."""

import json
import os
import subprocess
import tempfile
import unittest

import turboquant

SHARED = os.environ.get("TQ_SHARED_DIR", os.path.join(os.path.dirname(__file__), "../../../shared"))
LLAMA = os.path.join(SHARED, "models", "tq-llama-21m")
EVAL = os.path.join(SHARED, "eval", "eval_other.txt")
CLI = os.environ.get("TQ_CLI", "turboquant")
PROMPT = "The dictionary defines a word as"


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True)


class TurboquantTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.isdir(LLAMA):
            if os.environ.get("CI") == "true":
                raise RuntimeError(f"shared model missing: {LLAMA}")
            raise unittest.SkipTest(f"shared model missing: {LLAMA}")
        cls.m = turboquant.load(LLAMA)

    def test_seeded_generation_equals_the_cli(self):
        out = cli("generate", "--model", LLAMA, "--prompt", PROMPT, "--max-tokens", "24",
                  "--temp", "0.8", "--seed", "5")
        self.assertEqual(out.returncode, 0, out.stderr)
        text = self.m.generate(PROMPT, max_tokens=24, temperature=0.8, seed=5)
        self.assertEqual(text, out.stdout)

    def test_stream_and_cancel(self):
        whole = self.m.generate(PROMPT, max_tokens=20, temperature=0)
        pieces = list(self.m.generate(PROMPT, max_tokens=20, temperature=0, stream=True))
        self.assertGreater(len(pieces), 1)
        self.assertEqual("".join(pieces), whole)
        s = self.m.generate(PROMPT, max_tokens=200, temperature=0, stream=True)
        next(s)
        next(s)
        s.close()
        self.assertEqual(s.finish_reason, "cancelled")
        self.assertLess(len(s.tokens), 200)

    def test_chat_and_tokenize(self):
        ids = self.m.tokenize("hello world")
        self.assertEqual(ids[0], 1)  # Llama's BOS
        self.assertEqual(self.m.detokenize(ids, skip_special_tokens=True), "hello world")
        reply = self.m.chat([{"role": "user", "content": "hi"}], max_tokens=8, temperature=0)
        self.assertIsInstance(reply, str)
        with self.assertRaises(turboquant.UsageError):
            self.m.chat([{"role": "user"}])

    def test_perplexity_equals_the_cli(self):
        out = cli("perplexity", "--model", LLAMA, "--file", EVAL, "--max-tokens", "2048", "--json")
        self.assertEqual(out.returncode, 0, out.stderr)
        want = json.loads(out.stdout)["ppl"]
        with open(EVAL, encoding="utf-8") as f:
            got = self.m.perplexity(f.read(), max_tokens=2048)
        self.assertAlmostEqual(got, want, places=6)

    def test_logits_are_numpy(self):
        ids = self.m.tokenize("The sky")
        l = self.m.logits(ids)
        try:
            import numpy  # noqa: F401
            self.assertEqual(l.shape, (len(ids), self.m.vocab_size))
            self.assertEqual(str(l.dtype), "float32")
        except ImportError:
            self.assertEqual(len(l), len(ids) * self.m.vocab_size)

    def test_embed_is_the_final_hidden_state(self):
        ids = self.m.tokenize("The sky over the harbour was grey.")
        rows = self.m.embed_ids(ids, pooling="none", normalize=False)
        last = self.m.embed_ids(ids, pooling="last", normalize=False)
        unit = self.m.embed("The sky over the harbour was grey.")
        d = self.m.hidden_size
        try:
            import numpy
        except ImportError:
            self.assertEqual(len(rows), len(ids) * d)
            self.assertEqual(list(last), list(rows[-d:]))
            self.assertAlmostEqual(sum(v * v for v in unit), 1.0, places=5)
            return
        self.assertEqual(rows.shape, (len(ids), d))
        self.assertEqual(str(unit.dtype), "float32")
        self.assertTrue(numpy.array_equal(last, rows[-1]))
        mean = rows.mean(axis=0)
        self.assertTrue(numpy.allclose(unit, mean / numpy.linalg.norm(mean), atol=1e-5))
        self.assertEqual(unit.shape, (d,))
        # (That these rows are the final hidden state, the LM head's input, tests/api checks.)
        with self.assertRaises(turboquant.UsageError):
            self.m.embed("x", pooling="max")
        with self.assertRaises(turboquant.UsageError):
            self.m.embed_ids([])

    def test_errors_carry_the_cli_message(self):
        # An existing directory that holds no model: both fail loading it with the same message
        # (a path that does not exist is caught earlier by the CLI's hub-id resolution).
        empty = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, empty)
        bad = empty
        out = cli("generate", "--model", bad, "--prompt", "x")
        self.assertEqual(out.returncode, 1)
        with self.assertRaises(turboquant.Error) as cm:
            turboquant.load(bad)
        self.assertTrue(str(cm.exception).startswith("["), str(cm.exception))
        self.assertIn(str(cm.exception), out.stderr)
        with self.assertRaises(turboquant.UsageError):
            turboquant.load(LLAMA, device="tpu")
        with self.assertRaises(turboquant.UsageError):
            self.m.generate("x", top_p=0)

    def test_plan_and_convert(self):
        p = turboquant.plan(LLAMA, context=2048, ram_gb=64)
        self.assertEqual(p["verdict"], "fits")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "q4")
            turboquant.convert(LLAMA, out, bits=4)
            q = turboquant.load(out)
            self.assertEqual(q.generate(PROMPT, max_tokens=4, temperature=0),
                             q.generate(PROMPT, max_tokens=4, temperature=0))
            with self.assertRaises(turboquant.UsageError):
                turboquant.convert(LLAMA, out, bits=4)  # exists, no force


if __name__ == "__main__":
    unittest.main()
