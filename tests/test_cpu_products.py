"""The CPU greedy path's products (``cpu_products``): those of one input as one product, a
decode pass's over oneDNN-packed weights; every row with the bits it has alone."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pytest_lceval.models.cpu_products import (  # noqa: E402
    CpuProducts,
    cpu_products,
    packing_available,
)

pytestmark = pytest.mark.skipif(not packing_available(), reason="no oneDNN packed linear")


def test_a_decode_pass_uses_packed_weights_a_prompt_f_linear_and_only_while_it_lasts() -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48)
    rows = torch.randn(2, 1, 64)
    plain = torch.nn.functional.linear(rows, linear.weight, linear.bias)
    with torch.inference_mode(), cpu_products(torch.nn.Sequential(linear)) as products:
        assert "forward" in vars(linear)
        assert torch.equal(linear(rows), plain)
        products.decoding = True
        packed = linear(rows)
        assert torch.allclose(packed, plain, atol=1e-5) and not torch.equal(packed, plain)
        assert packed.is_contiguous() and packed.shape == (2, 1, 48)
    assert "forward" not in vars(linear) and not products.decoding


def test_a_row_has_the_same_bits_whatever_rows_share_its_product() -> None:
    """What lets a pass check a draft: the first row of 1 to 64 rows, alike to the bit."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(576, 1536, bias=False)
    rows = torch.randn(64, 576)
    with torch.inference_mode(), cpu_products(torch.nn.Sequential(linear)) as products:
        products.decoding = True
        alone = linear(rows[:1])
        assert all(torch.equal(linear(rows[:count])[:1], alone) for count in (2, 3, 8, 17, 64))


class _SharedInput(torch.nn.Module):
    """A layer's shape in small: three products of one input (q, k and v; the second with a
    bias, as Qwen's), then another's whose weight is tied to an embedding's (an LM head's)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(64, 48, bias=False)
        self.second = torch.nn.Linear(64, 16)
        self.third = torch.nn.Linear(64, 64, bias=False)
        self.other = torch.nn.Linear(64, 48, bias=False)
        self.embed = torch.nn.Embedding(48, 64)
        self.other.weight = self.embed.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.first(x), self.second(x), self.third(x), self.other(x * 2)], -1)


def _misaligned(weight: torch.Tensor, offset: int) -> torch.nn.Parameter:
    """``weight``'s values starting ``offset`` bytes past a cache line, as a loaded checkpoint's
    weights can (SmolLM2's GGUF-loaded weights start 40 bytes past one)."""
    buffer = torch.empty(weight.numel() + 16)
    start = ((offset - buffer.data_ptr()) % 64) // 4
    moved = buffer[start:start + weight.numel()].view_as(weight)
    moved.copy_(weight)
    return torch.nn.Parameter(moved, requires_grad=False)


def _passes(model: torch.nn.Module, steps: list[torch.Tensor], products: CpuProducts) -> list[
        torch.Tensor]:
    """The model's outputs for each input, a decode pass's where it has few rows."""
    outputs = []
    for x in steps:
        products.decoding = x.shape[0] <= 2
        outputs.append(model(x))
    return outputs


@pytest.mark.parametrize("rows", [2, 300])
def test_products_of_one_input_are_one_product_with_the_same_bits(rows: int) -> None:
    """The first decode pass shows which linears read one input one after another; then a
    decode pass (2 rows) and a prompt (300 rows) compute them as one product, and every output
    keeps the bits it had alone. A prompt's stacked weights start where each weight did modulo a
    cache line (MKL's bits depend on it)."""
    torch.manual_seed(0)
    model = _SharedInput()
    for name in ("first", "second", "third"):
        linear = getattr(model, name)
        linear.weight = _misaligned(linear.weight.detach(), 40)
    steps = [torch.randn(2, 1, 64), torch.randn(2, 1, 64), *[torch.randn(rows, 64) for _ in "ab"]]
    with torch.inference_mode():
        model._lceval_products = CpuProducts(set())
        model._lceval_products.seen = None  # never learns: each product alone
        with cpu_products(model) as products:
            alone = _passes(model, steps, products)
        del model._lceval_products
        with cpu_products(model) as products:
            together = _passes(model, steps, products)
    products = model._lceval_products
    assert [group.members for group in {id(g): g for g in products.groups.values()}.values()
            ] == [[model.first, model.second, model.third], [model.other]]
    assert products.groups[model.first].stacked is not None
    assert all(torch.equal(a, b) for a, b in zip(alone, together, strict=True))


def test_stacked_weights_keep_each_weight_s_alignment_and_a_tied_one_stays() -> None:
    torch.manual_seed(0)
    model = _SharedInput()
    for name in ("first", "second", "third"):
        linear = getattr(model, name)
        linear.weight = _misaligned(linear.weight.detach(), 40)
    steps = [torch.randn(2, 1, 64) for _ in range(2)]
    with torch.inference_mode(), cpu_products(model) as products:
        _passes(model, steps, products)
    stacked = model._lceval_products.groups[model.first].stacked
    assert stacked is not None and stacked.data_ptr() % 64 == 40
    assert model.second.weight.data_ptr() % 64 == model.third.weight.data_ptr() % 64 == 40
    assert model.third.weight.untyped_storage().data_ptr() == stacked.untyped_storage().data_ptr()
    tied = _SharedInput()
    tied._lceval_products = CpuProducts({id(tied.first.weight)})  # as if another module held it
    with torch.inference_mode(), cpu_products(tied) as products:
        _passes(tied, steps, products)
    assert tied._lceval_products.groups[tied.second].stacked is None  # the group stays put
