"""docs/python.md's complete example runs and prints what the page says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import ROOT


def blocks(page: str):
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        text = f.read()
    example = re.search(r"^```python\n(.*?)^```$", text, re.S | re.M)
    shown = re.search(r"^It prints:\n\n```\n(.*?)^```$", text, re.S | re.M)
    assert example and shown, f"{page}: no example, or no 'It prints:' block"
    return example.group(1), shown.group(1)


def test_the_python_page_example(tmp_path):
    code, want = blocks("docs/python.md")
    path = tmp_path / "example.py"
    path.write_text(code)
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == want
