import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from musacoder.models import ChatRequest, Sampling, make_client, parse_model_spec
from musacoder.models.openai_http import OpenAIChatClient, OpenAIClientConfig
from musacoder.models.pregenerated import PregeneratedClient

from bench_helpers import write_responses


def test_parse_model_spec():
    s = parse_model_spec("openai:http://127.0.0.1:8000/v1#Qwen/Qwen3-8B")
    assert (s.kind, s.target, s.model) == ("openai", "http://127.0.0.1:8000/v1", "Qwen/Qwen3-8B")
    assert parse_model_spec("dir:/x/y").target == "/x/y"
    assert parse_model_spec("hf:/m").kind == "hf" and parse_model_spec("vllm:org/m").kind == "vllm"
    for bad in ("gpt-4", "openai:http://x/v1", "foo:bar", "dir:"):
        with pytest.raises(ValueError):
            parse_model_spec(bad)
    with pytest.raises(ValueError, match="unknown --model-arg"):
        make_client("openai:http://x/v1#m", {"bogus": 1})


def _req(task="19_ReLU", sample=0, turn=1, level=None):
    return ChatRequest(id=f"{task}-{sample}-{turn}", messages=({"role": "user", "content": "hi"},), task=task,
                       level=level, sample=sample, turn=turn, seed=7)


def test_pregenerated_layout(tmp_path):
    write_responses(tmp_path, {"19_ReLU": {"0.txt": "r0", "0.turn2.txt": "r0t2", "1.turn1.txt": "r1"},
                               "level2/19_ReLU": {"0.txt": "level2 r0"}})
    client = PregeneratedClient(tmp_path)
    reqs = [_req(), _req(turn=2), _req(sample=1), _req(sample=2), _req(turn=3), _req(level=2)]
    got = [c.text for _, c in client.generate(reqs, Sampling())]
    assert got == ["r0", "r0t2", "r1", None, None, "level2 r0"]
    missing = dict((r.id, c) for r, c in client.generate([_req(sample=2)], Sampling()))
    assert "2.txt" in missing["19_ReLU-2-1"].error
    with pytest.raises(FileNotFoundError):
        PregeneratedClient(tmp_path / "nope")


class _Handler(BaseHTTPRequestHandler):
    calls: list = []
    fail_first: int = 0
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            type(self).calls.append((self.path, dict(self.headers), body))
            fail = type(self).fail_first > 0
            if fail:
                type(self).fail_first -= 1
        if body["model"] == "bad-request":
            self._reply(400, {"error": {"message": "no such model"}})
        elif fail:
            self._reply(429, {"error": "slow down"}, {"Retry-After": "0"})
        else:
            text = "echo: " + body["messages"][-1]["content"]
            self._reply(200, {"choices": [{"message": {"role": "assistant", "content": text,
                                                       "reasoning_content": "thinking..."},
                                           "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 3, "completion_tokens": 5}})

    def _reply(self, code, data, headers=None):
        raw = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def server():
    _Handler.calls = []
    _Handler.fail_first = 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_openai_client_retries_auth_and_concurrency(server, monkeypatch):
    monkeypatch.setenv("BENCH_TEST_KEY", "sekrit")
    _Handler.fail_first = 2  # two 429s with Retry-After: 0, then success
    client = make_client(f"openai:{server}#tiny", {"api_key_env": "BENCH_TEST_KEY", "concurrency": 4,
                                                   "backoff_s": 0.01, "timeout_s": 10})
    reqs = [ChatRequest(id=str(i), messages=({"role": "user", "content": f"q{i}"},), task="t", sample=i, seed=i)
            for i in range(6)]
    out = {r.id: c for r, c in client.generate(reqs, Sampling(temperature=0.5, top_p=0.9, max_tokens=99))}
    assert sorted(out) == [str(i) for i in range(6)]
    for i in range(6):
        c = out[str(i)]
        assert c.error is None and c.finish_reason == "stop"
        assert c.text == f"<think>\nthinking...\n</think>\necho: q{i}"  # separate reasoning kept as a think block
        assert c.usage["completion_tokens"] == 5
    assert len(_Handler.calls) == 8
    path, headers, body = _Handler.calls[-1]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sekrit"
    assert body["model"] == "tiny" and body["temperature"] == 0.5 and body["top_p"] == 0.9
    assert body["max_tokens"] == 99 and isinstance(body["seed"], int)


def test_openai_client_gives_up_cleanly(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = OpenAIChatClient(OpenAIClientConfig(base_url=server, model="bad-request", backoff_s=0.01))
    [(_, c)] = list(client.generate([_req()], Sampling()))
    assert c.text is None and "HTTP 400" in c.error and len(_Handler.calls) == 1  # not retried
    assert "Authorization" not in _Handler.calls[0][1]
    dead = OpenAIChatClient(OpenAIClientConfig(base_url="http://127.0.0.1:9/v1", model="m", max_retries=1,
                                               backoff_s=0.01, timeout_s=2))
    [(_, c)] = list(dead.generate([_req()], Sampling()))
    assert c.text is None and "gave up after 2 attempts" in c.error


def make_tiny_hf_model(path):
    """A 1-layer Llama with random weights and a byte-level tokenizer built in code (no hub access)."""
    pytest.importorskip("transformers", reason="the hf: model client needs transformers: pip install -e '.[train]'")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    specials = ["<|im_start|>", "<|im_end|>", "<pad>"]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<pad>")
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    config = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                         eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, bos_token_id=None)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path


def test_hf_local_client_tiny_model(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = make_tiny_hf_model(tmp_path / "tiny")
    client = make_client(f"hf:{path}", {"batch_size": 2, "device": "cpu"})
    reqs = [_req(sample=i) for i in range(3)]
    out = list(client.generate(reqs, Sampling(temperature=0.8, max_tokens=12)))
    assert [r.sample for r, _ in out] == [0, 1, 2]
    assert all(isinstance(c.text, str) and c.finish_reason in ("stop", "length") for _, c in out)


def test_hf_client_takes_a_training_stage_folder(tmp_path, monkeypatch):
    """`hf:FOLDER` where FOLDER is a `train sft|rft|rl` output: the model its musacoder.json names is loaded; a stage
    folder without a model is an error saying what to pass."""
    from musacoder.manifest import Manifest, write_manifest

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = tmp_path / "runs" / "rl"
    make_tiny_hf_model(run / "final")
    write_manifest(run, Manifest(stage="rl", files={"model": "final"}))
    client = make_client(f"hf:{run}", {"device": "cpu"})
    [(_, completion)] = list(client.generate([_req()], Sampling(temperature=0.0, max_tokens=4)))
    assert isinstance(completion.text, str) and client.name == f"hf:{(run / 'final').resolve()}"
    write_manifest(tmp_path / "data", Manifest(stage="data", files={"sft": "sft.jsonl"}))
    with pytest.raises(ValueError, match=r"a 'data' folder without a model; pass a Hugging Face model folder"):
        make_client(f"hf:{tmp_path / 'data'}", {"device": "cpu"})
