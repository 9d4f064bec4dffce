/* SPDX-License-Identifier: Apache-2.0 */
/* dlsym@@GLIBC_2.34 and dlsym@GLIBC_2.2.5: see dlsym.c. */
    .text
    .globl gf_dlsym_new
    .globl gf_dlsym_old
    .type gf_dlsym_new, @function
    .type gf_dlsym_old, @function
    .symver gf_dlsym_new, dlsym@@GLIBC_2.34
    .symver gf_dlsym_old, dlsym@GLIBC_2.2.5
gf_dlsym_new:
gf_dlsym_old:
    .cfi_startproc
    endbr64
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call gf_dlsym_lookup
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jnz 1f
    jmp *gf_real_dlsym(%rip)
1:
    ret
    .cfi_endproc
    .size gf_dlsym_new, .-gf_dlsym_new
    .section .note.GNU-stack,"",@progbits
