# Fuzzing (issue 18): libFuzzer harnesses of the httpd-free units, with
# AddressSanitizer and UBSan (clang from Debian).  The units are compiled
# again for it, into build/fuzz; each harness t/fuzz/fuzz_NAME.c becomes
# build/fuzz/fuzz_NAME.
#   make fuzz                 every harness for FUZZ_TIME seconds (60)
#   make fuzz FUZZ=token      one harness
# make test-all runs them all (t/fuzz/run.sh): per harness executions, edges
# and crashes; a crash fails the suite and leaves its input in
# build/fuzz/crashes.  Inputs under t/fuzz/regress/NAME/ (crashes found
# before, kept as regression tests) run first, every time.
FUZZ_CC      ?= clang
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS   = -std=gnu99 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
                $(FUZZ_SAN) $(WARN) -Imodules -It/fuzz $(APR_CFLAGS) \
                $(ENGINE_CFLAGS)
FUZZ_OBJ      = build/fuzz/obj
FUZZ_LIB      = build/fuzz/liblessons.a
FUZZ_HARNESS  = $(patsubst t/fuzz/fuzz_%.c,build/fuzz/fuzz_%,$(wildcard t/fuzz/fuzz_*.c))

$(FUZZ_OBJ)/%.o: modules/%.c $(HEADERS)
	@mkdir -p $(@D)
	@echo "  CC    $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_LIB): $(patsubst modules/%.c,$(FUZZ_OBJ)/%.o,$(UNITS))
	@echo "  AR    $@"
	@rm -f $@ && ar rcs $@ $^

build/fuzz/fuzz_%: t/fuzz/fuzz_%.c t/fuzz/fuzz.h t/fuzz/fuzz_keys.h $(FUZZ_LIB)
	@echo "  CC    $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB) \
	    $(LIBS) $(APR_LIBS)

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_HARNESS)

fuzz: test-deps
	@$(MAKE) -s --no-print-directory fuzz-build
	@t/fuzz/run.sh $(FUZZ)

# In make test-all, beside the integration suite (one CPU: FUZZ_JOBS=1),
# built with the rest beforehand.
BACKGROUND_SUITES += t/fuzz/run.sh
TEST_BUILDS += fuzz-build
