// Starts the vendored Swagger UI on /docs. A file, not an inline script, so the
// page runs under the same Content-Security-Policy as every other page.
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    layout: "BaseLayout",
    presets: [SwaggerUIBundle.presets.apis],
    // No badge fetched from validator.swagger.io: the page talks to this origin only.
    validatorUrl: null,
  });
})();
