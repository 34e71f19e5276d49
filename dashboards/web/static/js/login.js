// Sign-in: a failed attempt keeps the username (the server never echoes it back).
"use strict";

(() => {
  const form = document.getElementById("login-form");
  const user = document.getElementById("username");
  const pass = document.getElementById("password");
  if (!form || !user) return;
  const KEY = "sumpwatch.login.username";
  form.addEventListener("submit", () => {
    try { sessionStorage.setItem(KEY, user.value); } catch (e) { /* storage off: nothing kept */ }
  });
  let kept = "";
  try { kept = sessionStorage.getItem(KEY) || ""; } catch (e) { kept = ""; }
  if (document.getElementById("login-error") && kept && !user.value) {
    user.value = kept;
    if (pass) pass.focus();
  }
})();
