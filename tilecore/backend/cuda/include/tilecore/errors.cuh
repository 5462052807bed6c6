// tilecore C++ tile runtime: device-side checks that end a launch with an
// error the host reports (tilecore/runtime/device_errors.py), without a trap:
// __trap() would leave the CUDA context unusable, this leaves it working.
// Included only by kernels that contain such a check (a range() step known
// only at run time), so other kernels compile as before.
#pragma once

namespace tc {

// One per device, in page-locked host memory mapped into the device's address
// space; the layout is mirrored by runtime/device_errors.py (_Record). The
// device only loads and stores it: atomics on mapped host memory are not
// atomic for the host, and not allowed at all where the GPU has no
// host-native atomics (a PCIe H100).
struct ErrorRecord {
  unsigned int ready;     // 1 + the check's index once the fields below are written
  unsigned int taken;     // how many records the host has read (written by the host)
  unsigned int module;    // the loaded module that failed (host-side table)
  unsigned int block[3];  // blockIdx of the failing block
  long long value;        // the offending value (e.g. the step)
};

// Where this module reports, set by the host when it loads the module.
struct ErrorChannel {
  ErrorRecord* record;    // the device's record (mapped host memory)
  unsigned int* claimed;  // device memory, one word per device: how many records blocks claimed
  unsigned int module;
  unsigned int unused;
};

}  // namespace tc

// C linkage: the host finds it by this name (cuModuleGetGlobal).
extern "C" {
__device__ tc::ErrorChannel tc_error_channel;
}

namespace tc {

// Record that check `check` failed with `value` in this block. The failing
// condition depends only on scalars, which every thread of a block holds alike,
// so all threads of the block call this together and then return together (no
// barrier is left waiting). Thread 0 writes.
//
// The record is free while every record claimed so far has been read by the
// host (`claimed` == `taken`); the first block to move `claimed` past `taken`
// (a device-scope compare-and-swap on device memory) owns it, and later
// failures, until the host has read it, are dropped. The fields are made
// visible to the host before `ready`, which the host polls.
__device__ __noinline__ void report_error(unsigned int check, long long value) {
  if (threadIdx.x != 0) return;
  const ErrorChannel channel = tc_error_channel;
  if (channel.record == nullptr) return;  // the host did not connect this module
  volatile ErrorRecord* r = channel.record;
  const unsigned int taken = r->taken;
  if (atomicCAS(channel.claimed, taken, taken + 1u) != taken) return;
  __threadfence_system();  // the claim, and the read of `taken`, before the writes below
  r->module = channel.module;
  r->block[0] = blockIdx.x;
  r->block[1] = blockIdx.y;
  r->block[2] = blockIdx.z;
  r->value = value;
  __threadfence_system();  // the host sees the fields before `ready`
  r->ready = check + 1u;
}

}  // namespace tc
