"""Regenerates the expected outputs of the chat-template tests with the real jinja2 (the same
environment transformers uses, see hf_jinja.py):

    python3 tests/tokenizer/templates/make_expected.py

writes conformance.json (from conformance_cases.py) and <family>.cases.json for every
<family>.jinja fixture (inputs from family_cases.py)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import jinja2  # noqa: E402

import conformance_cases  # noqa: E402
import family_cases  # noqa: E402
import hf_jinja  # noqa: E402


def write(path, data):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    out = {"generator": f"jinja2 {jinja2.__version__} via make_expected.py", "cases": []}
    for case in conformance_cases.CASES:
        name, source, variables = case[:3]
        hf = case[3] if len(case) > 3 else True
        status, text = hf_jinja.render(source, variables, hf)
        entry = {"name": name, "template": source, "vars": variables, "hf": hf}
        entry["expected" if status == "ok" else "error"] = text
        out["cases"].append(entry)
    write(os.path.join(HERE, "conformance.json"), out)

    for family, cases in family_cases.FAMILIES.items():
        with open(os.path.join(HERE, family + ".jinja"), encoding="utf-8") as f:
            source = f.read()
        results = []
        for c in cases:
            variables = {"messages": c["messages"], "tools": c.get("tools"), "documents": None,
                         "add_generation_prompt": c.get("add_generation_prompt", False)}
            variables.update(family_cases.SPECIAL_TOKENS.get(family, {}))
            variables.update(c.get("extra", {}))
            status, text = hf_jinja.render(source, variables)
            entry = dict(c)
            entry["extra"] = {**family_cases.SPECIAL_TOKENS.get(family, {}), **c.get("extra", {})}
            entry["expected" if status == "ok" else "error"] = text
            results.append(entry)
        write(os.path.join(HERE, family + ".cases.json"),
              {"generator": f"jinja2 {jinja2.__version__} via make_expected.py", "cases": results})


if __name__ == "__main__":
    main()
