#include "c10d/ErrorFile.hpp"

#include <cxxabi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>

#include "c10d/core/Json.hpp"
#include "c10d/core/Logging.hpp"

namespace c10d::inline v1 {
namespace {

std::string jsonString(const std::string& text) {
  std::string out;
  detail::appendJsonString(out, text);
  return out;
}

std::string currentExceptionText() {
  std::exception_ptr error = std::current_exception();
  if (!error) return "std::terminate called without an active exception";
  std::string type = "an unknown exception";
  if (const std::type_info* info = abi::__cxa_current_exception_type()) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> name(
        abi::__cxa_demangle(info->name(), nullptr, nullptr, &status), std::free);
    type = status == 0 && name ? name.get() : info->name();
    // The ABI namespace is not what users write.
    for (size_t at; (at = type.find("c10d::v1::")) != std::string::npos;) type.erase(at + 6, 4);
  }
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return type + ": " + e.what();
  } catch (...) {
    return type;
  }
}

std::terminate_handler previousHandler = nullptr;

void writeThenTerminate() {
  writeErrorFile(currentExceptionText());
  if (previousHandler != nullptr) previousHandler();
  std::abort();
}

}  // namespace

bool writeErrorFile(const std::string& message) noexcept {
  try {
    const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
    if (path == nullptr || *path == '\0') return false;
    static std::mutex mutex;
    std::lock_guard<std::mutex> guard(mutex);
    auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
    // torchrun requires extraInfo.timestamp (a string of epoch seconds): without it the agent
    // fails to read the file. py_callstack is what its summary prints as the traceback.
    const std::string text = jsonString(message);
    std::string json = "{\"message\": {\"message\": " + text +
                       ", \"extraInfo\": {\"py_callstack\": " + text + ", \"timestamp\": \"" +
                       std::to_string(seconds) + "\"}}}\n";
    std::ofstream file(path, std::ios::trunc);
    file << json;
    file.close();
    if (!file) {
      C10D_LOG(Warning, "could not write the error file TORCHELASTIC_ERROR_FILE=", path);
      return false;
    }
    return true;
  } catch (...) {
    return false;
  }
}

void installErrorFileHandler() {
  static std::once_flag once;
  std::call_once(once, [] { previousHandler = std::set_terminate(writeThenTerminate); });
}

}  // namespace c10d::inline v1
