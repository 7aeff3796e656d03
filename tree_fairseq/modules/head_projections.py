"""The query, key, value and output projections of a multi-head self-attention, shared by the
attention modules that compute their weights themselves (:mod:`.parent_scaled_attention`,
:mod:`.constituent_attention`).

The projections' names (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``), creation order and
initialisation are those of fairseq's ``MultiheadAttention`` with one embedding size for queries,
keys and values: Xavier-uniform with gain ``1/√2`` for the three input projections, plain
Xavier-uniform for the output projection and a zero output bias (the input biases keep
``nn.Linear``'s own initialisation). So a fairseq transformer layer's state dict loads into a
module built on them, and a seeded model draws the same parameters whichever module holds them.
"""

import math

from torch import Tensor, nn


class HeadProjections(nn.Module):
    """Base of a multi-head self-attention module: ``embed_dim``, ``num_heads``, ``head_dim``,
    ``dropout`` (the attention dropout's probability, applied by the subclass) and the four
    projections."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.zeros_(self.out_proj.bias)

    def _split_heads(self, x: Tensor) -> Tensor:
        """``(B, n, H·dh)`` -> ``(B, H, n, dh)``."""
        return x.view(x.size(0), x.size(1), self.num_heads, self.head_dim).transpose(1, 2)

    def _merge_heads(self, x: Tensor) -> Tensor:
        """``(B, H, n, dh)`` -> ``(B, n, H·dh)``."""
        return x.transpose(1, 2).reshape(x.size(0), x.size(2), self.embed_dim)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The queries, scaled by ``1/√dh``, the keys and the values of ``x (B, n, d)``, each
        ``(B, H, n, dh)``."""
        queries = self._split_heads(self.q_proj(x)) * self.head_dim**-0.5
        return queries, self._split_heads(self.k_proj(x)), self._split_heads(self.v_proj(x))
