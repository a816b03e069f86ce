// CUDA graphs for the decode step (CudaBackend's Backend::BeginStep / EndStep): the ops of a
// step are captured from the backend's stream into a graph, which then runs as one launch. A
// decode step is ~13 kernels a layer; launched one by one each pays the host's launch call and
// the device's gap between kernels, while a graph's kernels start back to back.
//
// One executable graph is kept per step key (the model's step shape: tokens, sequences) and is
// updated in place from each new capture (cudaGraphExecUpdate: the kernels' arguments change
// every step — positions, cache lengths, split counts — the topology rarely does; when it does
// the graph is instantiated again). The first step of a key runs eagerly: it makes the lazy
// uploads, scratch growth and function attributes that must not happen inside a capture.
// Host bytes that an op copies to the device during a capture (token ids, positions) are staged
// in pinned memory that lives until the graph has run, since the graph reads them at launch.
// TURBOQUANT_CUDA_GRAPHS=1 turns graphs on (read at each BeginStep; off by default until measured
// on a GPU).
#pragma once

#if !defined(TQ_CUDA_EMU)
#include <cuda_runtime_api.h>
#endif

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace tq::kernels::cuda {

#if defined(TQ_CUDA_EMU)
// The host emulator has no graphs: every step runs eagerly.
class StepGraphs {
 public:
  explicit StepGraphs(cudaStream_t) {}
  bool Begin(int64_t) { return false; }
  bool capturing() const { return false; }
  const void* Stage(const void* host, size_t) { return host; }
  void Finish() {}
  void Retire(void*) {}
  std::vector<void*> TakeRetired() { return {}; }
};
#else
class StepGraphs {
 public:
  explicit StepGraphs(cudaStream_t stream) : stream_(stream) {}
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // Starts capturing a step of shape `key` (true), or leaves the step eager (false: graphs off,
  // the key's first step, a capture already open, or the capture could not start).
  bool Begin(int64_t key);
  bool capturing() const { return capturing_; }
  // Pinned copy of host[0..bytes) valid until this step's graph has run (capturing only).
  const void* Stage(const void* host, size_t bytes);
  // Ends the capture and launches the step's graph on the stream (a sync point or the step's end
  // calls it); throws tq::Error when the capture was invalidated (its work cannot run) and turns
  // graphs off for the process.
  void Finish();
  // Device memory freed while capturing: the owner frees it after the next stream sync (the graph
  // being captured may still use it), taking the list with TakeRetired.
  void Retire(void* p) { retired_.push_back(p); }
  std::vector<void*> TakeRetired() { return std::exchange(retired_, {}); }

 private:
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    int64_t steps = 0;
  };
  cudaStream_t stream_;
  std::map<int64_t, Graph> graphs_;
  bool capturing_ = false, disabled_ = false;
  int64_t key_ = 0;
  struct Chunk {
    void* p = nullptr;
    size_t bytes = 0;
  };
  std::vector<Chunk> staging_;   // pinned chunks, reused each step from the start
  size_t chunk_ = 0, used_ = 0;  // the chunk being filled, bytes used in it
  cudaEvent_t done_ = nullptr;   // recorded after each graph launch (its staged inputs read)
  std::vector<void*> retired_;
};
#endif

}  // namespace tq::kernels::cuda
