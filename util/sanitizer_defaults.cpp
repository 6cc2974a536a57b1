// Compiled into every executable of a sanitized build (-DLUONG_SANITIZE=...) and into nothing else:
// the sanitizers' options travel with the binaries, so a test's `luong` subprocess, a run by hand and
// CI all check the same way without an environment to set. ASAN_OPTIONS, UBSAN_OPTIONS and
// LSAN_OPTIONS given at run time still override these.

extern "C" {

// intercept_tls_get_addr=0: GCC 12's runtime misreads the dynamic TLS of the libraries that
// libluong_commands.so brings in with dlopen (a DTLS entry of 0x1bc3c-0x280001cd3e), and the leak
// checker's tracer then dies on SIGSEGV at exit ("Tracer caught signal 11"). Without the interception
// those blocks are not scanned as roots; nothing of ours lives only in thread-local storage.
// allocator_may_return_null=1: an allocation too large for the machine fails as it does without
// ASan (posix_memalign returns ENOMEM and LibTorch throws), so the out-of-memory error is tested too.
const char* __asan_default_options() { return "detect_leaks=1:intercept_tls_get_addr=0:allocator_may_return_null=1"; }

// Undefined behaviour fails the run, with the stack that reached it.
const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }

// Libraries that keep process-wide caches on purpose and never free them: fontconfig's font list and
// pattern cache, filled the first time pango lays out a label (util/plot.cpp). Our own code has no
// entry here.
// One-line errors stay one line: no table of the suppressions used at exit.
const char* __lsan_default_options() { return "print_suppressions=0"; }

const char* __lsan_default_suppressions() { return "leak:libfontconfig.so\n"; }

}  // extern "C"
