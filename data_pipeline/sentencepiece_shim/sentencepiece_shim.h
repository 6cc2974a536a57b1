#pragma once
// C interface of libluong_sentencepiece.so, a thin wrapper over sentencepiece loaded with dlopen.
//
// Why: Debian's libsentencepiece embeds and exports its own protobuf 3.14 runtime, while LibTorch
// pulls in libprotobuf 3.21. Linked into one program, the two interpose each other's symbols and
// the process crashes in a static initialiser before main(). Loading sentencepiece through this
// shim with RTLD_LOCAL | RTLD_DEEPBIND keeps each protobuf bound to its own library.
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// All functions return 0 on success; on failure they write a message into `error`.
int luong_spm_train(const char* const* sentences, size_t count, const char* const* keys, const char* const* values,
                    size_t arguments, char* error, size_t error_size);
/// A processor of the serialized model `bytes` (the caller reads the file, bounded); null on failure.
void* luong_spm_load(const char* bytes, size_t size, char* error, size_t error_size);
void luong_spm_unload(void* processor);
/// Pieces are returned as consecutive NUL-terminated strings in a malloc'd buffer of `*size` bytes.
int luong_spm_encode(void* processor, const char* text, size_t text_size, char** pieces, size_t* size, char* error,
                     size_t error_size);
/// `pieces`: consecutive NUL-terminated strings, `size` bytes in all; the text is malloc'd.
int luong_spm_decode(void* processor, const char* pieces, size_t size, char** text, size_t* text_size, char* error,
                     size_t error_size);
void luong_spm_free(void* buffer);

#ifdef __cplusplus
}
#endif
