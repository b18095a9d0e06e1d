// Prompts for models that write leap candidates, and the kernel in their answers (leap agent,
// leap sft, the LM policy). The verdict's wording is in prompt/verdict.h.
#pragma once
#include <optional>
#include <string>

#include "common/backend.h"
#include "tasks/task.h"

namespace leap::prompt {

// The first user message for a task: leap's candidate ABI, a worked example, the task's tensors
// on `backend` and its PyTorch reference (the template leap serve's Python client uses too).
// `template_path`: another template with the same fields ({name}, {description}, {level},
// {language}, {inputs}, {outputs}, {torch_code}, {fence}); "" = leap's.
std::string task_prompt(const Task& t, Backend backend, const std::string& template_path = "");

// `user` with the experience memory's context appended (unchanged when the context is empty):
// the wording leap agent and the LM policy in leap run share.
std::string with_memory(const std::string& user, const std::string& context);

// The feedback of an answer without a code block (a compile_error).
inline constexpr const char* kNoCodeBlock = "the answer has no fenced code block (```cpp ... ```) with the kernel";

// The kernel in a model's answer: the last fenced code block that defines leap_kernel, else the
// last fenced block; nullopt when the answer has none.
std::optional<std::string> extract_code(const std::string& answer);

// What an answer says it does: its text outside fenced code blocks, whitespace collapsed, valid
// UTF-8, at most `max_bytes` (the experience memory's decision of a case).
std::string prose_of(const std::string& answer, size_t max_bytes = 600);

}  // namespace leap::prompt
