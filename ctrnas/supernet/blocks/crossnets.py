"""TorchRec's cross networks with forwards TorchScript can compile (exported models are scripted).

Same classes, parameters and math as `torchrec.modules.crossnet`; TorchRec indexes its ParameterLists by a
loop variable, which TorchScript rejects, so these walk the layers with `zip` instead. Tests check each
equals TorchRec's own forward.
"""

from __future__ import annotations

import torch
from torchrec.modules.crossnet import CrossNet, LowRankCrossNet, LowRankMixtureCrossNet


class ScriptableCrossNet(CrossNet):
    """x_{l+1} = x0 * (W_l x_l + b_l) + x_l with full-rank W_l (DCN-v2 Eq. 1)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        x0 = input.unsqueeze(2)
        xl = x0
        for w, b in zip(self.kernels, self.bias):
            xl = x0 * (torch.matmul(w, xl) + b) + xl
        return xl.squeeze(2)


class ScriptableLowRankCrossNet(LowRankCrossNet):
    """x_{l+1} = x0 * (W_l (V_l x_l) + b_l) + x_l with W_l n x r, V_l r x n."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        xl = input
        for w, v, b in zip(self.W_kernels, self.V_kernels, self.bias):
            xl = input * (torch.nn.functional.linear(torch.nn.functional.linear(xl, v), w) + b) + xl
        return xl


class ScriptableLowRankMixtureCrossNet(LowRankMixtureCrossNet):
    """DCN-v2 Eq. 3: a softmax-gated mixture of K low-rank experts x0 * (U g(C g(V x_l)) + b_l), g = ReLU."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        # einsum, not broadcast matmuls: those expand the kernels to one copy per example (30x slower)
        xl = input
        gates = self.gates
        assert gates is not None  # built with num_experts > 1 (ctrnas uses 4)
        for u, v, c, b in zip(self.U_kernels, self.V_kernels, self.C_kernels, self.bias):
            g = torch.softmax(torch.cat([gate(xl) for gate in gates], 1), 1)  # [B, K]
            h = torch.relu(torch.einsum("krs,bks->bkr", c, torch.relu(torch.einsum("krn,bn->bkr", v, xl))))
            experts = input.unsqueeze(1) * (torch.einsum("knr,bkr->bkn", u, h) + b.squeeze(1))  # [B, K, n]
            xl = torch.einsum("bkn,bk->bn", experts, g) + xl
        return xl
