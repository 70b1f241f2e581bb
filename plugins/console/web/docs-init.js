// Swagger UI on the gateway's own document. validatorUrl null: no call to an outside validator (no internet here).
'use strict';
window.ui = window.SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  validatorUrl: null,
  tryItOutEnabled: false,
});
