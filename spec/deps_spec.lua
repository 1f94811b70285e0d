-- scripts/deps.sh builds Mbed TLS from Debian 13's source package, fetched
-- from the archive this machine's own apt sources name (no host is written
-- in the repository): the first source of the machine's release, in either
-- format apt reads, and MH_DEBIAN_ARCHIVE over all. Rows of fake apt
-- sources (APT_CONFIG points apt at them) and os-release files, through
-- `deps.sh --mbedtls-archive`, which fetches and installs nothing.
local H = require "helper"

local BOOKWORM = 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n'
local TRIXIE = 'ID=debian\nVERSION_ID="13"\nVERSION_CODENAME=trixie\n'

-- { name, os-release, sources.list (one-line format), a .sources file (deb822), env, wanted archive or nil }
local ROWS = {
  { "one-line sources.list, the security archive first", BOOKWORM,
    "deb http://security.invalid/debian-security bookworm-security main\n"
      .. "deb http://mirror.invalid/debian bookworm main\n", nil, "", "http://mirror.invalid/debian/" },
  { "deb822 .sources, updates and the release in one stanza", BOOKWORM, "",
    "Types: deb\nURIs: http://deb822.invalid/debian\nSuites: bookworm-updates bookworm\nComponents: main\n",
    "", "http://deb822.invalid/debian/" },
  { "Debian 13 takes its own release's archive", TRIXIE,
    "deb http://old.invalid/debian bookworm main\ndeb http://new.invalid/debian trixie main\n", nil, "",
    "http://new.invalid/debian/" },
  { "deb-src lines count too", BOOKWORM, "deb-src http://src.invalid/debian bookworm main\n", nil, "",
    "http://src.invalid/debian/" },
  { "MH_DEBIAN_ARCHIVE overrides the sources", BOOKWORM, "deb http://mirror.invalid/debian bookworm main\n",
    nil, "MH_DEBIAN_ARCHIVE=http://override.invalid/debian ", "http://override.invalid/debian" },
  { "no source for this release: an error naming MH_DEBIAN_ARCHIVE", BOOKWORM,
    "deb http://other.invalid/debian sid main\n", nil, "", nil },
}

describe("scripts/deps.sh", function()
  it("takes Mbed TLS's source archive from the machine's apt sources", function()
    for _, row in ipairs(ROWS) do
      local name, os_release, list, sources, env, want = table.unpack(row)
      local dir = H.tmpname(".apt")
      assert(os.execute("mkdir -p " .. dir .. "/parts"))
      H.write_file(dir .. "/os-release", os_release)
      H.write_file(dir .. "/sources.list", list)
      if sources then H.write_file(dir .. "/parts/test.sources", sources) end
      H.write_file(dir .. "/apt.conf", 'Dir::Etc::SourceList "' .. dir .. '/sources.list";\n'
        .. 'Dir::Etc::SourceParts "' .. dir .. '/parts";\n')
      local out, ok = H.sh(env .. "APT_CONFIG=" .. dir .. "/apt.conf MH_OS_RELEASE=" .. dir
        .. "/os-release sh scripts/deps.sh --mbedtls-archive")
      os.execute("rm -rf " .. dir)
      if want then
        assert(ok, name .. ": " .. out)
        assert.equal(want, (out:gsub("%s+$", "")), name)
      else
        assert.falsy(ok, name .. ": " .. out)
        assert.truthy(out:find("MH_DEBIAN_ARCHIVE", 1, true), name .. ": " .. out)
      end
    end
  end)
end)
