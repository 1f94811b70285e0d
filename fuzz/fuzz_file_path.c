/*
 * libFuzzer target for the static-file path decoder. The first byte says
 * whether dotfiles are allowed. Whatever decodes must be a name that
 * cannot leave the root: relative, no NUL, no empty, "." or ".." segment,
 * and no segment starting with '.' unless allowed.
 */
#include "file_open.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool dotfiles = data[0] & 1;
    char out[512];
    size_t len;
    if (mh_file_path_decode((const char *)data + 1, size - 1, dotfiles, out, sizeof out, &len))
        return 0;
    if (len >= sizeof out || out[len] != '\0' || strlen(out) != len)
        abort();
    if (len && (out[0] == '/' || out[len - 1] == '/'))
        abort();
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && out[j] != '/')
            j++;
        size_t n = j - i;
        if (n == 0)
            abort();
        if (out[i] == '.' && (!dotfiles || n == 1 || (n == 2 && out[i + 1] == '.')))
            abort();
        i = j + 1;
    }
    return 0;
}
