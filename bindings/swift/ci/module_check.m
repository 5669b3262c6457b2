/* The CTrie module through Objective-C's @import, the spelling Swift's Clang importer mirrors. Linked into
 * ci/module_check.c (-DCTRIE_WITH_OBJC); no Objective-C runtime is needed: scripts/test-swift-module.sh. */
@import CTrie;

int ctrie_objc_check(void) {
    trie_options options = {0};
    trie_state s = TRIE_STATE_FINISHED;
    return (int)options.drop_unreachable + (s == UINT32_MAX ? 0 : 1) + (trie_start(NULL) == 0 ? 0 : 1) +
           (int)TRIE_ERR_TOKEN_REJECTED - 7;
}
