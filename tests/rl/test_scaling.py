"""The trainer at real sequence lengths: chunked log-probs equal the plain computation (values and gradients),
micro batches accumulate the unsplit minibatch's gradient, and the memory the logits take is reported."""

import copy
import random

import pytest
import torch

from musacoder.rl.config import RLConfig

pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[train]' (or .[dev])")

import transformers  # noqa: E402

from musacoder.rl.trainer import Trainer, _TrainSeq, logits_chunk_bytes, response_log_probs  # noqa: E402

VOCAB = 97


def tiny_llama(seed=0, tie=True):
    torch.manual_seed(seed)
    conf = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                                    tie_word_embeddings=tie, pad_token_id=0)
    return transformers.LlamaForCausalLM(conf).float()


def batch(seed=1, n=5):
    rng = random.Random(seed)
    contexts = [[rng.randrange(3, VOCAB) for _ in range(rng.randrange(2, 9))] for _ in range(n)]
    responses = [[rng.randrange(3, VOCAB) for _ in range(rng.randrange(1, 23))] for _ in range(n)]
    return contexts, responses


@pytest.mark.parametrize("chunk", [1, 4, 7, 64])
def test_chunked_log_probs_equal_the_plain_ones_with_gradients(chunk):
    model = tiny_llama()
    contexts, responses = batch()
    plain, plain_ent = response_log_probs(model, contexts, responses, 0.9, pad_id=0, chunk_size=None)
    (plain.sum()).backward()
    plain_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    chunked, chunked_ent = response_log_probs(model, contexts, responses, 0.9, pad_id=0, chunk_size=chunk)
    (chunked.sum()).backward()
    torch.testing.assert_close(chunked, plain, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(chunked_ent, plain_ent, rtol=1e-5, atol=1e-5)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, plain_grads[name], rtol=1e-4, atol=1e-6, msg=name)
    # and they are the log-probs of the sampled tokens: check one by hand
    i = 2
    ids = torch.tensor([contexts[i] + responses[i]])
    logits = model(input_ids=ids).logits[0].float() / 0.9
    k = len(contexts[i])
    by_hand = torch.log_softmax(logits[k - 1], -1)[responses[i][0]]
    torch.testing.assert_close(chunked[i, 0].detach(), by_hand.detach(), rtol=1e-5, atol=1e-5)


def test_chunked_log_probs_through_lora_adapters():
    peft = pytest.importorskip("peft", reason="peft is not installed: pip install -e '.[train]'")
    model = peft.get_peft_model(tiny_llama(tie=False), peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                                                       task_type="CAUSAL_LM", init_lora_weights=False))
    contexts, responses = batch(seed=3)
    with torch.no_grad():
        plain, _ = response_log_probs(model, contexts, responses, 1.0, pad_id=0, chunk_size=None)
        chunked, _ = response_log_probs(model, contexts, responses, 1.0, pad_id=0, chunk_size=5)
        with model.disable_adapter():
            base, _ = response_log_probs(model, contexts, responses, 1.0, pad_id=0, chunk_size=5)
    torch.testing.assert_close(chunked, plain, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(base, chunked)  # the adapters are in the chunked path too


def trainer_for(tmp_path, micro, delta=0.05, kl=0.01):
    cfg = RLConfig.model_validate({
        "model": {"device": "cpu"}, "env": {"kind": "toy"},
        "grpo": {"minibatch_size": 6, "micro_batch_size": micro, "logprob_chunk_size": 4, "kl_coef": kl},
        "mirrorpop": {"delta": delta},
        "run": {"steps": 1, "out_dir": str(tmp_path / f"run{micro}"), "threads": 1},
    })
    from musacoder.rl.tokenizer import CharTokenizer

    return Trainer(cfg, model=tiny_llama(), tokenizer=CharTokenizer("abcdefgh=|\n "), tasks=[])


def unsplit_gradients(model, ref_model, seqs, delta, kl, temperature=0.9):
    """The minibatch step written out plainly: one forward over all sequences, MirrorPop, token-mean loss."""
    from musacoder.rl.grpo import clipped_policy_loss
    from musacoder.rl.mirrorpop import mirrorpop_keep

    contexts, responses = [s.context_ids for s in seqs], [s.response_ids for s in seqs]
    logp, _ = response_log_probs(model, contexts, responses, temperature, pad_id=0)
    with torch.no_grad():
        ref, _ = response_log_probs(ref_model, contexts, responses, temperature, pad_id=0)
    mask, old = torch.zeros_like(logp), torch.zeros_like(logp)
    for i, s in enumerate(seqs):
        mask[i, : len(s.response_ids)] = 1
        old[i, : len(s.response_ids)] = torch.tensor(s.rollout_log_probs)
    keep = mirrorpop_keep(logp.detach(), old, mask, delta)
    adv = torch.tensor([s.advantage for s in seqs])
    loss, _ = clipped_policy_loss(logp, old, adv, mask * keep[:, None], 0.2, 0.28, ref, kl)
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}, int((~keep).sum()), float(loss)


@pytest.mark.parametrize("micro", [1, 2, 4, 6])
def test_micro_batches_accumulate_the_unsplit_gradient(tmp_path, micro):
    contexts, responses = batch(seed=5, n=6)
    model, ref_model = tiny_llama(), tiny_llama(seed=9)  # a reference that differs, so the KL term acts
    with torch.no_grad():
        logp, _ = response_log_probs(model, contexts, responses, 0.9, pad_id=0)
    seqs = []
    for i, (c, r) in enumerate(zip(contexts, responses)):
        drift = 0.5 if i in (1, 4) else 0.0  # two sequences drifted past δ: MirrorPop pops them
        seqs.append(_TrainSeq(c, r, [float(x) + drift for x in logp[i, : len(r)]], advantage=(-1.0) ** i * (i + 1)))
    expected, popped, loss = unsplit_gradients(copy.deepcopy(model), ref_model, seqs, delta=0.05, kl=0.01)
    assert popped == 2

    trainer = trainer_for(tmp_path, micro)
    try:
        trainer.model.load_state_dict(model.state_dict())
        trainer.ref_model.load_state_dict(ref_model.state_dict())
        trainer.model.zero_grad(set_to_none=True)
        st = trainer.minibatch_gradients(seqs)
        got = {n: p.grad.clone() for n, p in trainer.model.named_parameters()}
    finally:
        trainer.close()
    assert st["popped"] == 2 and st["kl_sum"] > 0
    assert st["loss_sum"] / st["kept_tokens"] == pytest.approx(loss, rel=1e-5)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-7, msg=name)


def test_logits_memory_is_reported_per_step(tmp_path):
    cfg = RLConfig.model_validate({
        "model": {"device": "cpu", "tiny": {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64}},
        "env": {"kind": "toy"}, "rollout": {"max_new_tokens": 3, "temperature": 1.0, "top_p": 1.0},
        "grpo": {"group_size": 4, "prompts_per_step": 2, "minibatch_size": 8, "micro_batch_size": 2,
                 "logprob_chunk_size": 2},
        "multi_turn": {"single_turn_steps": 1},
        "run": {"steps": 1, "out_dir": str(tmp_path / "run"), "threads": 1},
    })
    trainer = Trainer(cfg)
    try:
        row = trainer.step()
    finally:
        trainer.close()
    vocab = len(trainer.tokenizer)
    if row["seqs_trained"]:
        assert row["mem_logits_chunk_bytes"] == 4 * 2 * 2 * vocab  # micro batch 2 × 2 positions × vocab, float32
    assert row["mem_rss_peak_bytes"] > 0 and "mem_cuda_peak_bytes" not in row


def test_logits_chunk_bytes_at_the_documented_kernel_config():
    # 16 sequences × 8192 response tokens × 152,064 vocabulary (Qwen2.5-7B), float32
    assert logits_chunk_bytes(16, 8192, 152_064, None) == 79_725_330_432  # 74.25 GiB, all at once
    assert logits_chunk_bytes(2, 8192, 152_064, 1024) == 1_245_708_288  # 1.16 GiB per chunk (micro batch 2)
    assert logits_chunk_bytes(2, 100, 152_064, 1024) == 4 * 2 * 100 * 152_064  # short responses: one chunk


# --- rollout log-probs ---------------------------------------------------------------------------------------------

def char_model_and_tokenizer():
    from musacoder.rl.tokenizer import CharTokenizer

    tok = CharTokenizer("abcdefgh=|\n ")
    torch.manual_seed(0)
    conf = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                                    pad_token_id=0, eos_token_id=1, bos_token_id=1)
    return transformers.LlamaForCausalLM(conf), tok


@pytest.mark.parametrize("temperature,top_p", [(0.9, 0.95), (1.0, 1.0), (0.0, 1.0)])
def test_rollout_log_probs_are_those_the_trainer_recomputes(temperature, top_p):
    from musacoder.rl.rollout import HFGenerator

    model, tok = char_model_and_tokenizer()
    contexts = [tok.encode("a="), tok.encode("bb|c="), tok.encode("h")]
    torch.manual_seed(1)
    results = HFGenerator(model, tok, temperature, top_p, max_new_tokens=12).generate(contexts)
    recomputed, _ = response_log_probs(model, contexts, [ids for ids, _ in results], temperature or 1.0, pad_id=0)
    assert any(len(ids) > 1 for ids, _ in results)
    for i, (ids, logps) in enumerate(results):
        assert len(logps) == len(ids)
        torch.testing.assert_close(torch.tensor(logps), recomputed[i, : len(ids)], rtol=1e-5, atol=1e-5)


def test_rollout_samples_through_top_p_but_records_untruncated_log_probs():
    from musacoder.rl.rollout import HFGenerator

    model, tok = char_model_and_tokenizer()
    contexts = [tok.encode("a="), tok.encode("c=")]
    greedy = HFGenerator(model, tok, 0.0, 1.0, max_new_tokens=8).generate(contexts)
    torch.manual_seed(3)
    nucleus = HFGenerator(model, tok, 1.0, 1e-6, max_new_tokens=8).generate(contexts)  # top-p keeps 1 token
    assert [ids for ids, _ in nucleus] == [ids for ids, _ in greedy]
    assert all(lp < 0 for _, lps in nucleus for lp in lps)  # of softmax(z / T), not of the truncated distribution
