-- DSH prompt files (`*.dshprompt`; `*.dsh.md` is Markdown already) are edited as Markdown.
vim.filetype.add({ extension = { dshprompt = "markdown" } })
