//===- LayerNormImage.cpp - the layer-norm kernels' fatbin, embedded ------===//
//
// The build compiles LayerNorm.cu with nvcc into the fatbin at
// KILN_LAYER_NORM_FATBIN; the assembler copies its bytes in here.
// cuModuleLoadData reads a fatbin's size from its header, and wants it
// 8-byte aligned.
//
//===----------------------------------------------------------------------===//

__asm__(".section .rodata.kiln_layer_norm,\"a\",@progbits\n"
        ".balign 64\n"
        ".globl kiln_layer_norm_fatbin\n"
        ".hidden kiln_layer_norm_fatbin\n"
        "kiln_layer_norm_fatbin:\n"
        ".incbin \"" KILN_LAYER_NORM_FATBIN "\"\n"
        ".previous\n");
