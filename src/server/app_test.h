#ifndef MH_APP_TEST_H
#define MH_APP_TEST_H
/*
 * `moonhttp test [busted args]`: an app's busted specs run against this
 * binary, with nothing but the binary (a build or an install, no checkout).
 * busted finds `require "moonhttp.test"` in a private folder holding this
 * binary's own embedded copy, first on LUA_PATH, so the helper and the
 * server come from one build whatever an older install left on Lua's path;
 * moonhttp.test then starts this very binary (MOONHTTP_BIN). The arguments
 * go to busted untouched. Returns busted's exit status (128 + the signal
 * that ended it), or 127 with a message on stderr when busted is not
 * installed.
 */
int mh_app_test_run(int argc, char **argv);
#endif
