"""nvml.Device.throttling against a stand-in of the NVML library: which
clock-event reasons make a timing sample throttled."""
import ctypes

import pytest

from tilecore.tune import nvml


class FakeNvml:
    """The NVML calls Device makes, answering a fixed reason mask and clocks."""

    def __init__(self, mask, clock=1980, top=1980):
        self.mask, self.clock, self.top = mask, clock, top

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle, out):
        out._obj.value = self.mask
        return 0

    def nvmlDeviceGetClockInfo(self, handle, kind, out):
        if self.clock is None:
            return 999                                   # NVML_ERROR_UNKNOWN
        out._obj.value = self.clock
        return 0

    def nvmlDeviceGetMaxClockInfo(self, handle, kind, out):
        out._obj.value = self.top
        return 0


def throttling(mask, clock=1980, top=1980):
    return nvml.Device(FakeNvml(mask, clock, top), ctypes.c_void_p()).throttling()


@pytest.mark.parametrize("mask", [0x0, 0x001, 0x002, 0x010, 0x100, 0x200 | 0x400])
def test_reasons_that_are_not_throttling(mask):
    assert throttling(mask) == ""


@pytest.mark.parametrize("mask, name", [(0x008, "hw_slowdown"), (0x040, "hw_thermal"),
                                        (0x080, "hw_power_brake")])
def test_hardware_reasons_always_throttle(mask, name):
    assert throttling(mask | 0x001) == name            # even at full clock


@pytest.mark.parametrize("mask, name", [(0x004, "sw_power_cap"), (0x020, "sw_thermal")])
def test_software_reasons_throttle_only_below_the_clock_floor(mask, name):
    assert throttling(mask, clock=1800) == ""          # trimmed: every sample shares it
    assert throttling(mask, clock=int(0.75 * 1980)) == ""
    assert throttling(mask, clock=1400).startswith(name)
    assert "1400 of 1980 MHz" in throttling(mask, clock=1400)
    assert throttling(mask, clock=None) == name        # the clock unreadable: cautious
