"""JavaScript string lengths and JSON.stringify, checked against node when it is there."""

import json
import shutil
import subprocess

from sessiond.core.jsjson import js_number, js_stringify, utf16_length

SAMPLES = [
    {"path": "src/a.py", "n": 1.0, "ratio": 0.1, "big": 1e21, "small": 1e-7},
    {
        "emoji": "😀 héllo 漢字",
        "nested": [1, 2.5, {"x": None, "y": True}],
        "esc": 'a"b\\c\n\t\u0001',
    },
    {"nums": [100.0, 1e20, 123456789.125, -0.0, 5e-324, 1.7976931348623157e308, 2**60]},
    {"sep": "\u2028\u2029", "keys order": {"z": 1, "a": 2}},
]


def test_numbers_like_javascript():
    assert js_number(1.0) == "1"
    assert js_number(1e21) == "1e+21"
    assert js_number(1e20) == "100000000000000000000"
    assert js_number(1e-7) == "1e-7"
    assert js_number(0.000001) == "0.000001"
    assert js_number(-0.0) == "0"
    assert js_number(2**60) == "1152921504606847000"
    assert js_number(float("nan")) == "null"


def test_utf16_length():
    assert utf16_length("abc") == 3
    assert utf16_length("😀") == 2
    assert utf16_length("漢字") == 2
    assert utf16_length("a😀b👍🏽") == 8


def test_matches_node():
    assert shutil.which("node"), "node is part of the test setup (the TypeScript client needs it)"
    script = (
        "const s=JSON.parse(require('fs').readFileSync(0,'utf8'));"
        "console.log(JSON.stringify(s.map(v=>[JSON.stringify(v), JSON.stringify(v).length])))"
    )
    encoded = json.dumps(SAMPLES)
    result = subprocess.run(
        ["node", "-e", script], input=encoded, capture_output=True, text=True, check=True
    )
    expected = json.loads(result.stdout)
    for sample, (text, length) in zip(json.loads(encoded), expected, strict=True):
        assert js_stringify(sample) == text
        assert utf16_length(js_stringify(sample)) == length
