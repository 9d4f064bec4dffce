/* SPDX-License-Identifier: Apache-2.0 */
/* The driver's own definitions by name, read from its GNU hash table: init
 * resolves every entry point the shim uses, and a dlsym each (its error
 * machinery, a search of the handle's scope) cost most of init.
 *
 * Invariant: gf_elf_lookup returns what dlsym(handle, name) returns, or NULL
 * for "ask dlsym". dlsym on a handle searches the handle's own object first,
 * so a name that object defines as a plain function (global or weak, not
 * hidden, not an indirect function) is the one dlsym finds, provided the
 * object defines no symbol versions (then every definition is the name's
 * only one). Anything else is left to dlsym: no GNU hash table, version
 * definitions, any other kind of symbol, a name the object does not define.
 * Debug builds check each answer against dlsym and abort on a difference. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* ld.so relocates these addresses in place; an offset below the load base
 * has not been (a read-only dynamic section). */
static uintptr_t dyn_addr(uintptr_t base, uintptr_t p)
{
    return p < base ? p + base : p;
}

GF_HIDDEN int gf_elf_open(void *handle, gf_elf *e)
{
    struct link_map *lm = NULL;

    *e = (gf_elf){0};
    if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_ld)
        return -1;
    e->base = lm->l_addr;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB)
            e->symtab = (const void *)dyn_addr(e->base, d->d_un.d_ptr);
        else if (d->d_tag == DT_STRTAB)
            e->strtab = (const char *)dyn_addr(e->base, d->d_un.d_ptr);
        else if (d->d_tag == DT_GNU_HASH)
            e->hash = (const uint32_t *)dyn_addr(e->base, d->d_un.d_ptr);
        else if (d->d_tag == DT_VERDEF)
            return -1; /* versioned definitions: dlsym picks among them */
    }
    if (!e->symtab || !e->strtab || !e->hash || !e->hash[0])
        return -1;
    e->ok = true;
    return 0;
}

static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        h = h * 33 + *c;
    return h;
}

static void *accept(const gf_elf *e, const ElfW(Sym) * sym)
{
    unsigned bind = ELF64_ST_BIND(sym->st_info), type = ELF64_ST_TYPE(sym->st_info);
    if (sym->st_shndx == SHN_UNDEF || !sym->st_value || type != STT_FUNC ||
        (bind != STB_GLOBAL && bind != STB_WEAK) ||
        ELF64_ST_VISIBILITY(sym->st_other) == STV_HIDDEN ||
        ELF64_ST_VISIBILITY(sym->st_other) == STV_INTERNAL)
        return NULL;
    return (void *)(e->base + sym->st_value);
}

static void *lookup(const gf_elf *e, const char *name)
{
    const uint32_t nbuckets = e->hash[0], symoffset = e->hash[1], bloom_size = e->hash[2],
                   shift = e->hash[3];
    const ElfW(Addr) *bloom = (const void *)&e->hash[4]; /* .gnu.hash is word-aligned */
    const uint32_t *buckets = (const uint32_t *)&bloom[bloom_size];
    const uint32_t *chain = &buckets[nbuckets];
    const unsigned bits = sizeof(ElfW(Addr)) * 8;
    const ElfW(Sym) *syms = e->symtab;
    uint32_t h = gnu_hash(name), i;
    ElfW(Addr) word;

    if (!bloom_size)
        return NULL;
    word = bloom[(h / bits) % bloom_size];
    if (!((word >> (h % bits)) & (word >> ((h >> shift) % bits)) & 1))
        return NULL;
    if ((i = buckets[h % nbuckets]) < symoffset)
        return NULL;
    for (;; i++) {
        uint32_t ch = chain[i - symoffset];
        if ((ch | 1) == (h | 1) && strcmp(name, e->strtab + syms[i].st_name) == 0)
            return accept(e, &syms[i]);
        if (ch & 1)
            return NULL;
    }
}

GF_HIDDEN void *gf_elf_lookup(const gf_elf *e, void *handle, const char *name)
{
    void *fn = e->ok ? lookup(e, name) : NULL;
#ifndef NDEBUG
    if (fn && fn != gf_real_dlsym(handle, name)) {
        gf_log(GF_LOG_ERROR, "%s: the symbol table and dlsym disagree", name);
        abort(); /* a test build stops here: the invariant is broken */
    }
#endif
    return fn ? fn : gf_real_dlsym(handle, name);
}
