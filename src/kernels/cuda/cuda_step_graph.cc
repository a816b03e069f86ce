// StepGraphs (cuda_step_graph.h): capture, update-or-instantiate, launch.
#include "kernels/cuda/cuda_step_graph.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace tq::kernels::cuda {
namespace {

// Opt-in until the graphs have run on a GPU (session 17 built and emulated them; no device came).
bool GraphsWanted() {
  const char* v = std::getenv("TURBOQUANT_CUDA_GRAPHS");
  return v && std::string(v) == "1";
}

constexpr size_t kChunkBytes = size_t(1) << 20;  // a pinned staging chunk (ids, positions, lists)

}  // namespace

StepGraphs::~StepGraphs() {
  for (auto& [key, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  for (const Chunk& c : staging_) cudaFreeHost(c.p);
  if (done_) cudaEventDestroy(done_);
}

bool StepGraphs::Begin(int64_t key) {
  if (capturing_ || disabled_ || !GraphsWanted()) return false;
  Graph& g = graphs_[key];
  if (g.steps++ == 0) return false;  // the first step of a shape runs eagerly
  if (!done_ && cudaEventCreateWithFlags(&done_, cudaEventDisableTiming) != cudaSuccess) {
    cudaGetLastError();
    done_ = nullptr;
    return false;
  }
  // The staging chunks are rewritten from the start: the last graph must have read them.
  if (cudaEventSynchronize(done_) != cudaSuccess ||
      cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  capturing_ = true;
  key_ = key;
  chunk_ = 0;
  used_ = 0;
  return true;
}

const void* StepGraphs::Stage(const void* host, size_t bytes) {
  const size_t need = (bytes + 255) / 256 * 256;
  while (chunk_ < staging_.size() && used_ + need > staging_[chunk_].bytes) ++chunk_, used_ = 0;
  if (chunk_ == staging_.size()) {
    Chunk c;
    c.bytes = std::max(kChunkBytes, need);
    if (cudaHostAlloc(&c.p, c.bytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      Fail("cuda graphs", "out of pinned host memory: staging {} bytes of step inputs", c.bytes);
    }
    staging_.push_back(c);
    used_ = 0;
  }
  char* p = static_cast<char*>(staging_[chunk_].p) + used_;
  std::memcpy(p, host, bytes);
  used_ += need;
  return p;
}

void StepGraphs::Finish() {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(stream_, &graph);
  if (e != cudaSuccess || !graph) {
    cudaGetLastError();
    disabled_ = true;
    if (graph) cudaGraphDestroy(graph);
    Fail("cuda graphs",
         "the decode step's capture failed ({}): its work did not run; graphs are now off for "
         "this process (TURBOQUANT_CUDA_GRAPHS=0 turns them off from the start)",
         cudaGetErrorString(e));
  }
  Graph& g = graphs_[key_];
  if (g.exec) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(g.exec, graph, &info) != cudaSuccess) {
      cudaGetLastError();  // a new topology: instantiate again
      cudaGraphExecDestroy(g.exec);
      g.exec = nullptr;
    }
  }
  cudaError_t r = cudaSuccess;
  if (!g.exec) r = cudaGraphInstantiate(&g.exec, graph, 0);
  cudaGraphDestroy(graph);
  if (r == cudaSuccess) r = cudaGraphLaunch(g.exec, stream_);
  if (r == cudaSuccess) r = cudaEventRecord(done_, stream_);
  if (r != cudaSuccess) {
    cudaGetLastError();
    disabled_ = true;
    Fail("cuda graphs", "the decode step's graph could not run: {}", cudaGetErrorString(r));
  }
}

}  // namespace tq::kernels::cuda
