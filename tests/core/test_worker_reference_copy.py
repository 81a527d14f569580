"""The worker's reference copy made on the meta device and filled from the trusted side's state dict: the same model
as initialising it on the host and loading the state dict, and the host path wherever it could differ."""

import torch

from musacoder.judge.worker.calls import _from_state


class Plain(torch.nn.Module):
    def __init__(self, n: int = 32):
        super().__init__()
        self.fc = torch.nn.Linear(n, n)
        self.bn = torch.nn.BatchNorm1d(n)
        self.emb = torch.nn.Embedding(10, n)
        self.scale = torch.nn.Parameter(torch.randn(n))
        self.tied = self.fc  # one module under two names

    def forward(self, x):
        return self.bn(self.fc(x)) * self.scale


class NonPersistent(Plain):
    def __init__(self):
        super().__init__()
        self.register_buffer("noise", torch.randn(4), persistent=False)


class TensorAttribute(Plain):
    def __init__(self):
        super().__init__()
        self.table = {"k": [torch.randn(4)]}


class NeedsValues(Plain):
    def __init__(self):
        super().__init__()
        self.threshold = float(torch.rand(()))


def _state(cls):
    torch.manual_seed(0)
    model = cls()
    return model, {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_a_model_whose_state_dict_holds_every_tensor_is_made_without_a_host_init():
    host, state = _state(Plain)
    made = _from_state(torch, Plain, [], state, "cpu")
    assert made is not None and made.tied is made.fc
    assert list(made.state_dict()) == list(host.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(made.state_dict().values(), host.state_dict().values()))
    x = torch.randn(8, 32)
    host.eval(), made.eval()
    assert torch.equal(made(x), host(x))


def test_the_host_path_wherever_the_state_dict_does_not_say_everything():
    for cls in (NonPersistent, TensorAttribute, NeedsValues):
        _, state = _state(cls)
        assert _from_state(torch, cls, [], state, "cpu") is None, cls.__name__
    _, state = _state(Plain)
    state.pop("scale")  # a state dict that lacks a parameter (a task made elsewhere) never leaves one uninitialised
    assert _from_state(torch, Plain, [], state, "cpu") is None
