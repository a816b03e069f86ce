"""turboquant: TurboQuant LLM inference from Python.

    import turboquant
    m = turboquant.load("models/tq-llama-21m")
    print(m.generate("The sky is", max_tokens=32, temperature=0))
    for piece in m.generate("The sky is", max_tokens=32, stream=True):
        print(piece, end="", flush=True)
    print(m.chat([{"role": "user", "content": "Hello"}]))
    print(m.perplexity(open("eval.txt").read()))
    v = m.embed("a sentence")  # numpy [hidden_size]: the final hidden state, mean-pooled, unit norm

Errors raise turboquant.Error with the engine's "[where] what" message (turboquant.UsageError
for bad arguments). Compute runs with the GIL released.
"""

from ._turboquant import Error, UsageError, Model, Stream, load, convert, plan

__all__ = ["Error", "UsageError", "Model", "Stream", "load", "convert", "plan"]
