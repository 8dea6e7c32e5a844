"""Convolutional pieces of the PVT segmentation decoders, named as in the public PVT-GDLA
code: the full-resolution ResBlk skip, the ConvTranspose upsampler, and the two FFNs
(gated conv FFN of the GDLA block, plain MLP of the linear-attention baseline)."""
import torch
from torch import nn


class ResBlk(nn.Module):
    def __init__(self, in_chs: int, out_chs: int, norm_eps: float = 1e-5):
        super().__init__()
        self.proj = in_chs != out_chs
        self.conv1 = nn.Conv2d(in_chs, in_chs, 3, 1, 1, bias=False)
        self.norm1 = nn.BatchNorm2d(in_chs, eps=norm_eps)
        self.act = nn.ReLU()
        self.conv2 = nn.Conv2d(in_chs, out_chs, 3, 1, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(out_chs, eps=norm_eps)
        if self.proj:
            self.conv3 = nn.Conv2d(in_chs, out_chs, 1, 1, 0, bias=False)
            self.norm3 = nn.BatchNorm2d(out_chs, eps=norm_eps)
        else:
            self.conv3 = nn.Identity()
            self.norm3 = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm2(self.conv2(self.act(self.norm1(self.conv1(x)))))
        skip = self.norm3(self.conv3(x)) if self.proj else x
        return self.act(skip + y)


class Upsample(nn.Module):
    """x2 transposed convolution (exact doubling for any H, W)."""

    def __init__(self, in_chs: int, out_chs: int, ks: int = 3):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_chs, out_chs, ks, stride=2, padding=ks // 2,
                                     output_padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(x)


class GatedConvFfn(nn.Module):
    """1x1 conv to 2*hidden, SiLU, depthwise 3x3, split into (x, gate), x*SiLU(gate), 1x1."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.pwc1 = nn.Conv2d(dim, 2 * hidden, 1, 1, 0, bias=True)
        self.act = nn.SiLU()
        self.dwc = nn.Conv2d(2 * hidden, 2 * hidden, 3, 1, 1, groups=2 * hidden, bias=True)
        self.pwc2 = nn.Conv2d(hidden, dim, 1, 1, 0, bias=False)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        b, n, c = x.shape
        y = self.dwc(self.act(self.pwc1(x.reshape(b, h, w, c).permute(0, 3, 1, 2))))
        y, gate = y.chunk(2, dim=1)
        y = self.pwc2(y * self.act(gate))
        return y.permute(0, 2, 3, 1).reshape(b, n, c)


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.act = nn.GELU()
        nn.init.xavier_uniform_(self.fc1.weight)
        nn.init.xavier_uniform_(self.fc2.weight)
        nn.init.zeros_(self.fc1.bias)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class RMSNorm(nn.Module):
    """RMS norm over the last dim in float32, cast back, times a learned weight."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return y.type_as(x) * self.weight
