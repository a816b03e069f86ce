// Post-processors (tokenizer.json "post_processor"): add the special tokens around an encoded
// sequence when add_special_tokens is set. Only single sequences are encoded here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace tq::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Rewrites the ids of one sequence; called only when add_special_tokens is true.
  virtual void Process(std::vector<int32_t>& ids) const = 0;
};

// Types: TemplateProcessing, ByteLevel (ids unchanged), RobertaProcessing, BertProcessing,
// Sequence. Others -> tq::Error.
std::unique_ptr<PostProcessor> MakePostProcessor(const Json& j, const std::string& where);

}  // namespace tq::tok
