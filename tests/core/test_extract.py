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
