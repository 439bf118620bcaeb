/* serve_page.c — the web page `colibri serve` answers at /. */
#include "serve.h"

const char srv_page_html[] = "<!doctype html><html><head><meta charset=utf-8><title>colibri</title></head>"
                             "<body><p>colibri serve</p></body></html>\n";
