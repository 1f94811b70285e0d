-- scripts/deps.sh picks where Mbed TLS 3.6 comes from by /etc/os-release:
-- only Debian 12 (bookworm) unpacks Debian 13's package into .deps/; Debian
-- 13, testing and sid (whose /etc/debian_version reads "trixie/sid", not a
-- number) use the system's libmbedtls-dev. Rows of fake os-release files,
-- through `deps.sh --mbedtls-source`, which installs nothing.
local H = require "helper"

local ROWS = {
  { "Debian 12", 'NAME="Debian GNU/Linux"\nVERSION_ID="12"\nVERSION="12 (bookworm)"\nVERSION_CODENAME=bookworm\nID=debian\n', "unpack" },
  { "Debian 12, codename only", 'NAME="Debian GNU/Linux"\nVERSION_CODENAME=bookworm\nID=debian\n', "unpack" },
  { "Debian 13", 'NAME="Debian GNU/Linux"\nVERSION_ID="13"\nVERSION="13 (trixie)"\nVERSION_CODENAME=trixie\nID=debian\n', "system" },
  { "testing", 'PRETTY_NAME="Debian GNU/Linux trixie/sid"\nNAME="Debian GNU/Linux"\nVERSION_CODENAME=trixie\nID=debian\n', "system" },
  { "sid", 'PRETTY_NAME="Debian GNU/Linux forky/sid"\nNAME="Debian GNU/Linux"\nVERSION_CODENAME=sid\nID=debian\n', "system" },
}

describe("scripts/deps.sh", function()
  it("unpacks Mbed TLS 3.6 only on Debian 12; Debian 13, testing and sid take the system package", function()
    for _, row in ipairs(ROWS) do
      local f = H.tmpname(".os-release")
      H.write_file(f, row[2])
      local out, ok = H.sh("MH_OS_RELEASE=" .. H.shell_quote(f) .. " sh scripts/deps.sh --mbedtls-source")
      os.remove(f)
      assert(ok, out)
      local want = row[3] == "unpack" and "unpack Debian 13's libmbedtls-dev" or "system libmbedtls-dev"
      assert.truthy(out:find(want, 1, true), row[1] .. ": " .. out)
    end
  end)
end)
