// pybind11 bindings of the C++ library (include/turboquant/) plus convert: `import turboquant`.
// Every call into the engine releases the GIL; a streamed generation runs on its own thread and
// hands pieces to the Python iterator through a queue (closing the iterator cancels it).
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <turboquant/turboquant.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "convert/convert.h"
#include "convert/defaults.h"
#include "convert/repack.h"
#include "core/error.h"

namespace py = pybind11;
namespace tqa = turboquant;

namespace {

py::exception<tqa::Error>* g_error = nullptr;  // turboquant.Error
py::exception<tqa::Error>* g_usage = nullptr;  // turboquant.UsageError (a subclass)

tqa::GenerateOptions Options(int64_t max_tokens, std::optional<float> temperature,
                             std::optional<int32_t> top_k, std::optional<float> top_p,
                             std::optional<float> min_p, std::optional<float> repetition_penalty,
                             uint64_t seed, std::vector<std::string> stop) {
  tqa::GenerateOptions o;
  o.max_tokens = max_tokens;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.min_p = min_p;
  o.repetition_penalty = repetition_penalty;
  o.seed = seed;
  o.stop = std::move(stop);
  return o;
}

std::vector<tqa::Message> Messages(const py::list& messages) {
  std::vector<tqa::Message> out;
  for (const py::handle& h : messages) {
    const py::dict d = py::cast<py::dict>(h);
    if (!d.contains("role") || !d.contains("content"))
      throw tqa::Error(tqa::Error::Kind::kUsage, "[chat] every message needs 'role' and 'content'");
    out.push_back({py::cast<std::string>(d["role"]), py::cast<std::string>(d["content"])});
  }
  return out;
}

// `shape` float32 numpy array of `v` when numpy is importable, else the flat list.
py::object FloatArray(const std::vector<float>& v, std::vector<py::ssize_t> shape) {
  try {
    py::module_::import("numpy");
  } catch (const py::error_already_set&) {
    return py::cast(v);
  }
  py::array_t<float> a(shape);
  std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(float));
  return a;
}

tqa::EmbedOptions Embedding(const std::string& pooling, bool normalize) {
  tqa::EmbedOptions o;
  o.normalize = normalize;
  if (pooling == "mean")
    o.pooling = tqa::Pooling::kMean;
  else if (pooling == "last")
    o.pooling = tqa::Pooling::kLast;
  else if (pooling == "none")
    o.pooling = tqa::Pooling::kNone;
  else
    throw tqa::Error(tqa::Error::Kind::kUsage,
                     "[embed] pooling '" + pooling + "' is not one of mean, last, none");
  return o;
}

// Embed / EmbedIds' result as [hidden] or, pooling "none", [tokens, hidden].
py::object EmbeddingArray(const tqa::Model& m, const std::vector<float>& e,
                          const tqa::EmbedOptions& o) {
  const py::ssize_t d = py::ssize_t(m.hidden_size());
  if (o.pooling == tqa::Pooling::kNone) return FloatArray(e, {py::ssize_t(e.size()) / d, d});
  return FloatArray(e, {d});
}

// A generation on its own thread; pieces come out through Next().
class Stream {
 public:
  Stream(std::shared_ptr<tqa::Model> model, std::vector<int32_t> ids, tqa::GenerateOptions o)
      : model_(std::move(model)) {
    worker_ = std::thread([this, ids = std::move(ids), o = std::move(o)] {
      try {
        result_ = model_->GenerateIds(ids, o, [this](std::string_view piece) {
          std::lock_guard<std::mutex> l(mu_);
          pieces_.emplace_back(piece);
          cv_.notify_one();
          return !cancel_;
        });
      } catch (...) {
        std::lock_guard<std::mutex> l(mu_);
        error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
      cv_.notify_one();
    });
  }
  ~Stream() { Close(); }

  std::string Next() {
    std::unique_lock<std::mutex> l(mu_);
    {
      py::gil_scoped_release nogil;
      cv_.wait(l, [&] { return !pieces_.empty() || done_; });
    }
    if (!pieces_.empty()) {
      std::string p = std::move(pieces_.front());
      pieces_.pop_front();
      return p;
    }
    l.unlock();
    Join();
    if (error_) std::rethrow_exception(error_);
    throw py::stop_iteration();
  }
  void Close() {
    {
      std::lock_guard<std::mutex> l(mu_);
      cancel_ = true;
    }
    Join();
  }
  const tqa::GenerateResult& result() const { return result_; }
  bool done() const { return done_; }

 private:
  void Join() {
    if (worker_.joinable()) {
      py::gil_scoped_release nogil;
      worker_.join();
    }
  }
  std::shared_ptr<tqa::Model> model_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> pieces_;
  bool done_ = false, cancel_ = false;
  std::exception_ptr error_;
  tqa::GenerateResult result_;
};

}  // namespace

PYBIND11_MODULE(_turboquant, m) {
  m.doc() = "turboquant: TurboQuant LLM inference (C++ engine bindings)";
  // Never destroyed: they must outlive the interpreter's teardown of the module.
  g_error = new py::exception<tqa::Error>(m, "Error");
  g_usage = new py::exception<tqa::Error>(m, "UsageError", g_error->ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const tqa::Error& e) {
      (*(e.kind() == tqa::Error::Kind::kUsage ? g_usage : g_error))(e.what());
    } catch (const tq::UsageError& e) {
      (*g_usage)(e.what());
    } catch (const tq::Error& e) {
      (*g_error)(e.what());
    }
  });

  py::class_<Stream, std::shared_ptr<Stream>>(m, "Stream",
                                              "Iterator over the pieces of a streamed generation")
      .def("__iter__", [](std::shared_ptr<Stream> s) { return s; })
      .def("__next__", &Stream::Next)
      .def("close", &Stream::Close, "cancel the generation (finish_reason 'cancelled')")
      .def_property_readonly(
          "finish_reason", [](const Stream& s) { return s.done() ? s.result().finish_reason : ""; })
      .def_property_readonly("tokens", [](const Stream& s) { return s.result().tokens; });

  py::class_<tqa::Model, std::shared_ptr<tqa::Model>>(m, "Model")
      .def("tokenize", &tqa::Model::Tokenize, py::arg("text"), py::arg("add_special_tokens") = true,
           py::call_guard<py::gil_scoped_release>())
      .def(
          "detokenize",
          [](const tqa::Model& self, const std::vector<int32_t>& ids, bool skip) {
            py::gil_scoped_release nogil;
            return self.Detokenize(ids, skip);
          },
          py::arg("ids"), py::arg("skip_special_tokens") = false)
      .def(
          "apply_chat_template",
          [](const tqa::Model& self, const py::list& messages, bool add) {
            return self.ApplyChatTemplate(Messages(messages), add);
          },
          py::arg("messages"), py::arg("add_generation_prompt") = true)
      .def(
          "generate",
          [](std::shared_ptr<tqa::Model> self, const std::string& prompt, int64_t max_tokens,
             std::optional<float> temperature, std::optional<int32_t> top_k,
             std::optional<float> top_p, std::optional<float> min_p,
             std::optional<float> repetition_penalty, uint64_t seed, std::vector<std::string> stop,
             bool stream) -> py::object {
            const tqa::GenerateOptions o = Options(max_tokens, temperature, top_k, top_p, min_p,
                                                   repetition_penalty, seed, std::move(stop));
            std::vector<int32_t> ids;
            {
              py::gil_scoped_release nogil;
              ids = self->Tokenize(prompt, true);
            }
            if (stream) return py::cast(std::make_shared<Stream>(self, std::move(ids), o));
            tqa::GenerateResult r;
            {
              py::gil_scoped_release nogil;
              r = self->GenerateIds(ids, o);
            }
            return py::str(r.text);
          },
          py::arg("prompt"), py::arg("max_tokens") = 256, py::arg("temperature") = py::none(),
          py::arg("top_k") = py::none(), py::arg("top_p") = py::none(),
          py::arg("min_p") = py::none(), py::arg("repetition_penalty") = py::none(),
          py::arg("seed") = 0, py::arg("stop") = std::vector<std::string>(),
          py::arg("stream") = false,
          "Generate from a raw prompt: the text, or with stream=True an iterator of pieces")
      .def(
          "generate_ids",
          [](tqa::Model& self, const std::vector<int32_t>& ids, int64_t max_tokens,
             std::optional<float> temperature, uint64_t seed) {
            tqa::GenerateOptions o;
            o.max_tokens = max_tokens;
            o.temperature = temperature;
            o.seed = seed;
            py::gil_scoped_release nogil;
            return self.GenerateIds(ids, o).tokens;
          },
          py::arg("ids"), py::arg("max_tokens") = 256, py::arg("temperature") = py::none(),
          py::arg("seed") = 0, "Generate from prompt ids; returns the generated ids")
      .def(
          "chat",
          [](std::shared_ptr<tqa::Model> self, const py::list& messages, int64_t max_tokens,
             std::optional<float> temperature, uint64_t seed, bool stream) -> py::object {
            tqa::GenerateOptions o;
            o.max_tokens = max_tokens;
            o.temperature = temperature;
            o.seed = seed;
            const std::string prompt = self->ApplyChatTemplate(Messages(messages), true);
            std::vector<int32_t> ids;
            {
              py::gil_scoped_release nogil;
              ids = self->Tokenize(prompt, false);
            }
            if (stream) return py::cast(std::make_shared<Stream>(self, std::move(ids), o));
            tqa::GenerateResult r;
            {
              py::gil_scoped_release nogil;
              r = self->GenerateIds(ids, o);
            }
            return py::str(r.text);
          },
          py::arg("messages"), py::arg("max_tokens") = 256, py::arg("temperature") = py::none(),
          py::arg("seed") = 0, py::arg("stream") = false,
          "Reply to a conversation [{'role': ..., 'content': ...}] through the chat template")
      .def("perplexity", &tqa::Model::Perplexity, py::arg("text"), py::arg("ctx") = 512,
           py::arg("max_tokens") = 65536, py::call_guard<py::gil_scoped_release>(),
           "Perplexity with the protocol of `turboquant perplexity`")
      .def(
          "logits",
          [](tqa::Model& self, const std::vector<int32_t>& ids) -> py::object {
            std::vector<float> l;
            {
              py::gil_scoped_release nogil;
              l = self.Logits(ids);
            }
            return FloatArray(l, {py::ssize_t(ids.size()), py::ssize_t(self.vocab_size())});
          },
          py::arg("ids"), "Logits [len(ids), vocab] (numpy float32 when numpy is present)")
      .def(
          "embed",
          [](tqa::Model& self, const std::string& text, const std::string& pooling, bool normalize,
             bool add_special_tokens) {
            tqa::EmbedOptions o = Embedding(pooling, normalize);
            o.add_special_tokens = add_special_tokens;
            std::vector<float> e;
            {
              py::gil_scoped_release nogil;
              e = self.Embed(text, o);
            }
            return EmbeddingArray(self, e, o);
          },
          py::arg("text"), py::arg("pooling") = "mean", py::arg("normalize") = true,
          py::arg("add_special_tokens") = true,
          "Embedding of the final hidden state: [hidden_size] pooled ('mean' or 'last'), or "
          "[tokens, hidden_size] ('none'); unit L2 norm when normalize (numpy float32 when numpy "
          "is present)")
      .def(
          "embed_ids",
          [](tqa::Model& self, const std::vector<int32_t>& ids, const std::string& pooling,
             bool normalize) {
            const tqa::EmbedOptions o = Embedding(pooling, normalize);
            std::vector<float> e;
            {
              py::gil_scoped_release nogil;
              e = self.EmbedIds(ids, o);
            }
            return EmbeddingArray(self, e, o);
          },
          py::arg("ids"), py::arg("pooling") = "mean", py::arg("normalize") = true,
          "embed() from token ids as they are")
      .def_property_readonly("vocab_size", &tqa::Model::vocab_size)
      .def_property_readonly("hidden_size", &tqa::Model::hidden_size)
      .def_property_readonly("context", &tqa::Model::context)
      .def_property_readonly("architecture", &tqa::Model::architecture)
      .def_property_readonly("source_format", &tqa::Model::source_format);

  m.def(
      "load",
      [](const std::string& path, const std::string& device, int threads, int64_t context,
         bool quiet) {
        tqa::LoadOptions lo;
        lo.device = device;
        lo.threads = threads;
        lo.context = context;
        lo.quiet = quiet;
        py::gil_scoped_release nogil;
        return std::shared_ptr<tqa::Model>(tqa::Model::Load(path, lo));
      },
      py::arg("path"), py::arg("device") = "cpu", py::arg("threads") = 0, py::arg("context") = 0,
      py::arg("quiet") = true, "Load a Hugging Face, TurboQuant or turboquant-mlx checkpoint");

  m.def(
      "convert",
      [](const std::string& model, const std::string& out, int bits, std::optional<int> group_size,
         bool repack, bool force) {
        py::gil_scoped_release nogil;
        if (repack) {
          tq::RepackOptions r;
          r.model_dir = model;
          r.out_dir = out;
          r.force = force;
          tq::Repack(r);
          return;
        }
        tq::ConvertOptions o;
        o.model_dir = model;
        o.out_dir = out;
        o.recipe.bits = bits;
        if (group_size) o.recipe.group_size = *group_size;
        // The CLI's defaults for what was not given (8-bit embedding / LM head, e8 scales, the
        // group size for `bits`): the same file as `turboquant convert --bits B`.
        tq::ApplyConvertDefaults(o.recipe, {.group_size = group_size.has_value()});
        o.force = force;
        o.progress = false;
        tq::Convert(o);
      },
      py::arg("model"), py::arg("out"), py::arg("bits") = 4, py::arg("group_size") = py::none(),
      py::arg("repack") = false, py::arg("force") = false,
      "Convert a Hugging Face checkpoint (or repack a turboquant-mlx one) into a TurboQuant one");

  m.def(
      "plan",
      [](const std::string& path, int64_t context, double ram_gb) {
        tqa::PlanReport p;
        {
          py::gil_scoped_release nogil;
          p = tqa::Plan({path, context, ram_gb});
        }
        py::dict d;
        d["verdict"] = p.verdict;
        d["weights_bytes"] = p.weights_bytes;
        d["kv_bytes"] = p.kv_bytes;
        d["workspace_bytes"] = p.workspace_bytes;
        d["reserve_bytes"] = p.reserve_bytes;
        d["peak_bytes"] = p.peak_bytes;
        d["usable_bytes"] = p.usable_bytes;
        d["max_context"] = p.max_context;
        return d;
      },
      py::arg("path"), py::arg("context") = 4096, py::arg("ram_gb") = 0.0,
      "Will it fit? The memory plan of `turboquant plan` as a dict");
}
