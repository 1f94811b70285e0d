// The board's page: loads the links, adds one, votes, and follows the
// WebSocket (new links) and the event stream (counters).
const list = document.getElementById("links");
async function load() {
  const { links } = await (await fetch("/links")).json();
  list.replaceChildren(...links.map((l) => {
    const li = document.createElement("li");
    const a = document.createElement("a");
    a.href = l.url; a.textContent = l.title;
    const vote = document.createElement("button");
    vote.textContent = "+1";
    vote.onclick = async () => {
      const { votes } = await (await fetch(`/links/${l.id}/vote`, { method: "POST" })).json();
      vote.textContent = `+1 (${votes})`;
    };
    li.append(a, " by " + l.author + " ", vote);
    return li;
  }));
}
document.getElementById("login").onsubmit = async (e) => {
  e.preventDefault();
  await fetch("/login", { method: "POST", body: new URLSearchParams(new FormData(e.target)) });
};
document.getElementById("add").onsubmit = async (e) => {
  e.preventDefault();
  const f = new FormData(e.target);
  await fetch(`/links/${crypto.randomUUID()}`, { method: "PUT",
    body: JSON.stringify({ url: f.get("url"), title: f.get("title") }) });
};
const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`);
ws.onmessage = (m) => { if (m.data.startsWith("{")) load(); };
new EventSource("/events").addEventListener("stats", (e) => {
  const s = JSON.parse(e.data);
  document.getElementById("stats").textContent = `${s.links} links`;
});
load();
