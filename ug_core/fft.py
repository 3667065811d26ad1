"""The Array API standard's `fft` extension: `ug_core.fft`.

fft, ifft, fftn, ifftn, rfft, irfft, rfftn, irfftn, hfft, ihfft (numpy's meanings, with `n` /
`s`, `axis` / `axes` and `norm`), fftfreq and rfftfreq (with `d`, `dtype`, `device`), fftshift and
ifftshift. Each transform along an axis is a schedule item with a device hook (Device.fft): see
ug_core.array_api.fft and docs/fft.md for how each device computes it and how accurately."""

from .array_api.fft import (fft, fftfreq, fftn, fftshift, hfft, ifft, ifftn, ifftshift, ihfft, irfft, irfftn, rfft,
                            rfftfreq, rfftn)

__all__ = ["fft", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifftn", "ifftshift", "ihfft", "irfft", "irfftn",
           "rfft", "rfftfreq", "rfftn"]

from .array_api import aliasing as _aliasing  # noqa: E402
_aliasing.apply(globals(), __all__)   # numpy's aliasing rule (every function returns a value of its own)
