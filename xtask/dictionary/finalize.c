/* How crates/shiitake-store-sql/src/messages-v2.dict is made: zstd's
 * ZDICT_finalizeDictionary over the content of messages-v1.dict and the samples
 * samples.py writes, for level 3, with dictionary id 2. `cargo xtask dictionary`
 * builds and runs it against the zstd sources zstd-sys vendors (docs/xtask.md);
 * `--check` compares its output with the committed dictionary.
 *
 * It only adds the entropy tables (Huffman for literals, FSE for the sequences)
 * in front of v1's content: a message packed against it need not build them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdict.h"

static char *slurp(const char *path, size_t *size) {
    FILE *file = fopen(path, "rb");
    if (!file) { perror(path); exit(1); }
    fseek(file, 0, SEEK_END);
    *size = (size_t)ftell(file);
    fseek(file, 0, SEEK_SET);
    char *bytes = malloc(*size + 1);
    if (fread(bytes, 1, *size, file) != *size) { perror(path); exit(1); }
    fclose(file);
    return bytes;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s CONTENT SAMPLES OUT\n", argv[0]);
        return 2;
    }
    size_t content_size, samples_size;
    char *content = slurp(argv[1], &content_size);
    char *samples = slurp(argv[2], &samples_size);
    /* One sample a line, the newline not part of it. */
    size_t count = 0;
    for (size_t at = 0; at < samples_size; at++) count += samples[at] == '\n';
    size_t *sizes = malloc(count * sizeof *sizes);
    char *flat = malloc(samples_size);
    size_t n = 0, flat_size = 0, start = 0;
    for (size_t at = 0; at < samples_size; at++) {
        if (samples[at] != '\n') continue;
        memcpy(flat + flat_size, samples + start, at - start);
        sizes[n++] = at - start;
        flat_size += at - start;
        start = at + 1;
    }
    ZDICT_params_t params = {.compressionLevel = 3, .notificationLevel = 0, .dictID = 2};
    size_t capacity = content_size + 16384;
    char *dict = malloc(capacity);
    size_t size = ZDICT_finalizeDictionary(dict, capacity, content, content_size, flat,
                                           sizes, (unsigned)n, params);
    if (ZDICT_isError(size)) {
        fprintf(stderr, "finalize: %s\n", ZDICT_getErrorName(size));
        return 1;
    }
    FILE *out = fopen(argv[3], "wb");
    if (!out || fwrite(dict, 1, size, out) != size || fclose(out)) { perror(argv[3]); return 1; }
    fprintf(stderr, "%zu samples, %zu bytes of them: %zu bytes of dictionary\n", n, flat_size,
            size);
    return 0;
}
