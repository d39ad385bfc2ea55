//===- FlashAttentionImage.cpp - the attention kernels' fatbin, embedded --===//
//
// The build compiles FlashAttention.cu with nvcc into the fatbin at
// KILN_FLASH_ATTENTION_FATBIN; the assembler copies its bytes in here.
// cuModuleLoadData reads a fatbin's size from its header, and wants it
// 8-byte aligned.
//
//===----------------------------------------------------------------------===//

__asm__(".section .rodata.kiln_flash_attention,\"a\",@progbits\n"
        ".balign 64\n"
        ".globl kiln_flash_attention_fatbin\n"
        ".hidden kiln_flash_attention_fatbin\n"
        "kiln_flash_attention_fatbin:\n"
        ".incbin \"" KILN_FLASH_ATTENTION_FATBIN "\"\n"
        ".previous\n");
