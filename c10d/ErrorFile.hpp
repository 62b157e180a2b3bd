#pragma once

/// \file
/// writeErrorFile and installErrorFileHandler: a failing rank's error written to the error file
/// of torchrun or c10drun, which shows it in the launcher's summary.

#include <string>

namespace c10d::inline v1 {

/// The error file of torchrun (and c10drun): a launcher names a file per rank in
/// TORCHELASTIC_ERROR_FILE, and when the rank fails it reads the file and shows the error in its
/// summary, instead of only "exited with code 1".
///
/// Writes message as that file, in the JSON torchrun's agent reads ({"message": {"message": ...,
/// "extraInfo": {"py_callstack": ..., "timestamp": ...}}}). Returns false, writing nothing, when
/// the variable is unset; a file that cannot be written is logged, never thrown: this runs on the
/// way out of a failing program. Thread-safe; the last writer wins.
/// \param message the error's text.
/// \return True when the file was written; false when the variable is unset or the file could
///         not be written.
bool writeErrorFile(const std::string& message) noexcept;

/// Installs (once per process; later calls do nothing) a std::terminate handler that writes an
/// uncaught exception, its type and what(), to the error file, then calls the handler installed
/// before it (which prints and aborts). initProcessGroup installs it when TORCHELASTIC_ERROR_FILE
/// is set, so a C++ program that lets an error escape main shows it in the launcher's summary.
void installErrorFileHandler();

}  // namespace c10d::inline v1
