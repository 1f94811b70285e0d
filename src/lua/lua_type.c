#include "lua_type.h"

void mh_lua_register_type(lua_State *L, const struct mh_lua_type *t)
{
    if (luaL_newmetatable(L, t->name)) {
        if (t->methods) {
            lua_newtable(L);
            luaL_setfuncs(L, t->methods, 0);
            if (t->index)
                lua_pushcclosure(L, t->index, 1);
            lua_setfield(L, -2, "__index");
        }
        if (t->meta)
            luaL_setfuncs(L, t->meta, 0);
    }
    lua_pop(L, 1);
}
