/* The C API of libtrie for the CTrie module: trie.h from pkg-config's include directory (Cflags of trie.pc). */
#ifndef CTRIE_SHIM_H
#define CTRIE_SHIM_H
#include <trie.h>
#endif
