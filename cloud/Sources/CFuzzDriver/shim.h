#ifndef DOORBELL_CLOUD_FUZZ_DRIVER_H
#define DOORBELL_CLOUD_FUZZ_DRIVER_H
// libFuzzer's entry for programs that keep their own main (cloud-fuzz built with
// -sanitize=fuzzer: SwiftPM points `main` at cloud_fuzz_main, which hands over here).
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const unsigned char *data, unsigned long size));
#endif
