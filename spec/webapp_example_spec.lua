-- examples/webapp.lua, tested the way an app's author would: with moonhttp.test.
local test = require "moonhttp.test"
local cjson = require "cjson"

describe("examples/webapp.lua", function()
  local app
  setup(function() app = test.start("examples/webapp.lua", { workers = 1 }) end)
  teardown(function() app:stop() end)

  local FORM = { ["Content-Type"] = "application/x-www-form-urlencoded" }

  local function login()
    local status, headers = app:post("/login", "user=ann&password=wonderland", { headers = FORM })
    assert.equal(303, status)
    return headers["set-cookie"][1]:match("^(session=[^;]+)")
  end

  it("logs in with a form and keeps the user in a session cookie", function()
    local cookie = login()
    local status, _, body = app:get("/me", { headers = { Cookie = cookie } })
    assert.equal(200, status)
    assert.same({ user = "ann" }, cjson.decode(body))
    assert.equal(401, (app:get("/me")))
  end)

  it("refuses a cross-site POST; a same-origin one passes", function()
    local status, _, body = app:post("/login", "user=ann&password=wonderland", { headers = {
      ["Content-Type"] = FORM["Content-Type"], ["Sec-Fetch-Site"] = "cross-site", Origin = "https://evil.example" } })
    assert.equal(403, status)
    assert.equal("cross-origin request refused\n", body)
    assert.equal(403, (app:post("/logout", "", { headers = { Cookie = login(), Origin = "https://evil.example" } })))
    assert.equal(303, (app:post("/login", "user=ann&password=wonderland", { headers = {
      ["Content-Type"] = FORM["Content-Type"], ["Sec-Fetch-Site"] = "same-origin" } })))
  end)

  it("gives a new session id at login and revokes the old one; logout ends the session", function()
    local first = login()
    local status, headers = app:post("/login", "user=bob&password=builder", { headers = {
      Cookie = first, ["Content-Type"] = FORM["Content-Type"] } })
    assert.equal(303, status)
    local second = headers["set-cookie"][1]:match("^(session=[^;]+)")
    assert.not_equal(first, second)
    assert.equal(401, (app:get("/me", { headers = { Cookie = first } })))
    local _, _, body = app:get("/me", { headers = { Cookie = second } })
    assert.same({ user = "bob" }, cjson.decode(body))
    assert.equal(303, (app:post("/logout", "", { headers = { Cookie = second } })))
    assert.equal(401, (app:get("/me", { headers = { Cookie = second } })))
  end)

  it("refuses a wrong password and a malformed form", function()
    assert.equal(403, (app:post("/login", "user=ann&password=no", { headers = FORM })))
    assert.equal(400, (app:post("/login", "user=%zz", { headers = FORM })))
  end)

  it("a tampered session cookie is no session", function()
    local cookie = login()
    assert.equal(401, (app:get("/me", { headers = { Cookie = cookie:sub(1, -3) .. "xx" } })))
  end)

  it("streams an upload to disk", function()
    local cookie = login()
    local data = string.rep("0123456789", 30000)
    local body = "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"d.txt\"\r\n\r\n"
      .. data .. "\r\n--XX--\r\n"
    local status, _, rbody = app:post("/upload", body, { headers = {
      Cookie = cookie, ["Content-Type"] = "multipart/form-data; boundary=XX" } })
    assert.equal(200, status)
    local saved = cjson.decode(rbody).saved[1]
    assert.equal("d.txt", saved.filename)
    assert.equal(#data, saved.size)
  end)

  it("a broken upload is a 400", function()
    local status = app:post("/upload", "--XX\r\nnonsense", { headers = {
      Cookie = login(), ["Content-Type"] = "multipart/form-data; boundary=XX" } })
    assert.equal(400, status)
  end)

  it("runs a WebSocket chat for logged-in users", function()
    local status = select(2, app:websocket("/chat"))
    assert.equal(401, status)
    local cookie = login()
    local ann = assert(app:websocket("/chat", { headers = { Cookie = cookie }, protocols = { "chat" } }))
    assert.equal("chat", ann.protocol)
    assert.equal("ann joined", ann:receive())
    local ann2 = assert(app:websocket("/chat", { headers = { Cookie = cookie } }))
    assert.equal("ann joined", ann:receive())
    assert.equal("ann joined", ann2:receive())
    assert(ann2:send("hello room"))
    assert.same({ "ann: hello room", "text" }, { ann:receive() })
    assert.same({ "ann: hello room", "text" }, { ann2:receive() })
    assert.equal(1000, ann2:close())
    assert.equal("ann left", ann:receive())
    ann:close()
  end)

  it("serves the page", function()
    local status, headers, body = app:get("/")
    assert.equal(200, status)
    assert.matches("text/html", headers["content-type"])
    assert.matches("Please log in", body)
    -- rendered through views/home.html: the user's name in the page
    status, _, body = app:get("/", { headers = { Cookie = login() } })
    assert.equal(200, status)
    assert.matches("<p>Hello, ann</p>", body, 1, true)
    assert.is_nil(body:find("Please log in", 1, true))
  end)
end)
