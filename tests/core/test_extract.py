from musacoder.candidates import extract_code, infer_backend, strip_think

CODE = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    pass\n"


def test_last_python_block_after_think():
    text = f"<think>try ```python\nclass ModelNew: wrong\n```</think>\nFirst:\n```python\nx = 1\n```\nFinal:\n```python\n{CODE}```\n"
    c = extract_code(text)
    assert c.extract_error is None
    assert c.code.strip() == CODE.strip()


def test_plain_code_accepted():
    assert extract_code(CODE).code.strip() == CODE.strip()


def test_unclosed_think_is_dropped():
    assert strip_think("answer <think>still thinking") == "answer "
    assert strip_think("template opened</think>code") == "code"


def test_errors_are_clear():
    assert "empty" in extract_code("").extract_error
    assert "no code" in extract_code("I cannot do that.").extract_error
    assert "cpp" in extract_code("```cpp\nint main(){}\n```").extract_error
    assert "ModelNew" in extract_code("```python\nx = 1\n```").extract_error
    assert "parse" in extract_code("```python\ndef (:\n```").extract_error
    assert "unterminated" in extract_code("```python\nclass ModelNew: pass\n").extract_error


def test_backend_inference():
    assert infer_backend("import triton\n@triton.jit\ndef k(): pass") == "triton"
    assert infer_backend("load_inline(name='x', cpp_sources=a, cuda_sources=b)") == "cuda"
    assert infer_backend("load_inline(name='x', cpp_sources=a)") == "cpu"
    assert infer_backend("x = 1") is None


def test_bad_inputs_are_extract_errors_never_exceptions():
    from musacoder.candidates import MAX_RESPONSE_CHARS

    assert "no code found" in extract_code("blah " * 5000).extract_error  # the parser ran out of memory on this
    assert "longer than" in extract_code("x" * (MAX_RESPONSE_CHARS + 1)).extract_error
    assert "binary data" in extract_code("class ModelNew:\x00 pass").extract_error
    assert "binary data" in extract_code("```python\n\ufffd\ufffd\n```").extract_error
    assert "line 2" in extract_code("class ModelNew(nn.Module):\n    def forward(self x):\n        pass\n").extract_error
    err = extract_code("```python\nclass Foo:\n    pass\n```").extract_error
    assert "ModelNew" in err and "Foo" in err
    assert extract_code("class ModelNew:\n    x = " + "-" * 150000 + "1\n").extract_error  # deep recursion, no raise
    deep = "class ModelNew:\n    x = " + "(" * 300 + ")" * 300 + "\n"
    assert extract_code(deep).extract_error  # too deeply nested: a parse error, not a crash


def test_cpp_extension_load_shows_its_backend():
    assert infer_backend("ext = load(name='e', sources=['k.cu'])") == "cuda"
    assert infer_backend("ext = torch.utils.cpp_extension.load(name='e', sources=['k.cpp'])") == "cpu"
